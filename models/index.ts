import type { Sequelize } from 'sequelize';
import { IdempotencyRecord } from './idempotency-record.js';
import { Order } from './order.js';
import { Payment } from './payment.js';
import { Refund } from './refund.js';
import { User } from './user.js';

export { IdempotencyRecord, Order, Payment, Refund, User };

let initialised: Sequelize | undefined;

/** Binds every model to the process's Sequelize instance, once. */
export function initModels(sequelize: Sequelize): void {
  if (initialised === sequelize) return;
  User.initModel(sequelize);
  IdempotencyRecord.initModel(sequelize);
  Order.initModel(sequelize);
  Payment.initModel(sequelize);
  Refund.initModel(sequelize);
  initialised = sequelize;
}

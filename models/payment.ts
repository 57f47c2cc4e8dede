import {
  type CreationOptional,
  DataTypes,
  type InferAttributes,
  type InferCreationAttributes,
  Model,
  type Sequelize,
} from 'sequelize';
import { sqlLiteral } from '../core/sql.js';
import {
  nullableTextColumn,
  numericColumn,
  oneOfColumn,
  type StoredRow,
  textColumn,
  timeColumn,
} from '../core/stored-row.js';

/** The CHECK of payments.status (migration 20261121000004). */
export const PAYMENT_STATUSES = ['PROCESSING', 'SUCCEEDED', 'FAILED'] as const;
export type PaymentStatus = (typeof PAYMENT_STATUSES)[number];

export class Payment extends Model<InferAttributes<Payment>, InferCreationAttributes<Payment>> {
  declare id: string;
  /** Generated once; the gateway's idempotency key on every attempt. */
  declare paymentNo: string;
  declare merchantId: string;
  declare merchantOrderNo: string;
  declare orderId: string;
  declare userId: string;
  declare amount: string;
  declare currency: string;
  declare description: string | null;
  declare status: CreationOptional<PaymentStatus>;
  declare failureReason: CreationOptional<string | null>;
  declare chargeId: CreationOptional<string | null>;
  /** Set while the payment is resumable: its last attempt certainly charged nothing (CONTRACT section 3). */
  declare resumableSince: CreationOptional<Date | null>;
  /** What its SUCCEEDED refunds add up to (CONTRACT section 10); grows in a refund's Tx 2. */
  declare amountRefunded: CreationOptional<string>;
  declare createdAt: CreationOptional<Date>;
  declare updatedAt: CreationOptional<Date>;

  /**
   * The payment's INSERT as one escaped statement (every column given, timestamps from this process so
   * the instance already holds what the row holds), for a round trip it shares with other statements:
   * Tx 1 sends it with the record's link and COMMIT. A taken (merchant_id, merchant_order_no) fails
   * that round trip with the driver's unique violation (23505).
   */
  static insertStatement(p: Payment): string {
    return `INSERT INTO payments (id, payment_no, merchant_id, merchant_order_no, order_id, user_id, amount,
       currency, description, status, failure_reason, charge_id, resumable_since, created_at, updated_at)
     VALUES (${[
       p.id,
       p.paymentNo,
       p.merchantId,
       p.merchantOrderNo,
       p.orderId,
       p.userId,
       p.amount,
       p.currency,
       p.description,
       p.status,
       p.failureReason,
       p.chargeId,
       p.resumableSince,
       p.createdAt,
       p.updatedAt,
     ]
       .map(sqlLiteral)
       .join(', ')});`;
  }

  static initModel(sequelize: Sequelize): void {
    Payment.init(
      {
        id: { type: DataTypes.STRING(100), primaryKey: true },
        paymentNo: { type: DataTypes.STRING(64), allowNull: false },
        merchantId: { type: DataTypes.STRING(36), allowNull: false },
        merchantOrderNo: { type: DataTypes.STRING(64), allowNull: false },
        orderId: { type: DataTypes.BIGINT, allowNull: false },
        userId: { type: DataTypes.BIGINT, allowNull: false },
        amount: { type: DataTypes.DECIMAL(14, 2), allowNull: false },
        currency: { type: DataTypes.CHAR(3), allowNull: false },
        description: { type: DataTypes.STRING(200), allowNull: true },
        status: { type: DataTypes.STRING(12), allowNull: false, defaultValue: 'PROCESSING' },
        failureReason: { type: DataTypes.STRING(40), allowNull: true },
        chargeId: { type: DataTypes.STRING(100), allowNull: true },
        resumableSince: { type: DataTypes.DATE, allowNull: true },
        amountRefunded: { type: DataTypes.DECIMAL(14, 2), allowNull: false, defaultValue: '0.00' },
        createdAt: DataTypes.DATE,
        updatedAt: DataTypes.DATE,
      },
      { sequelize, tableName: 'payments', underscored: true },
    );
  }
}

/** The columns a payment's answer shows (payments/payment-reply.ts); a Payment instance has them. */
export type PaymentRow = Pick<
  Payment,
  | 'id'
  | 'paymentNo'
  | 'merchantId'
  | 'merchantOrderNo'
  | 'orderId'
  | 'amount'
  | 'currency'
  | 'status'
  | 'failureReason'
  | 'amountRefunded'
  | 'createdAt'
  | 'updatedAt'
>;

/** A payment's answer columns from its stored row (`SELECT *`, or an event's snapshot: core/stored-row.ts). */
export function paymentFromColumns(row: StoredRow): PaymentRow {
  return {
    id: textColumn(row, 'id'),
    paymentNo: textColumn(row, 'payment_no'),
    merchantId: textColumn(row, 'merchant_id'),
    merchantOrderNo: textColumn(row, 'merchant_order_no'),
    orderId: numericColumn(row, 'order_id'),
    amount: numericColumn(row, 'amount'),
    currency: textColumn(row, 'currency'),
    status: oneOfColumn(row, 'status', PAYMENT_STATUSES),
    failureReason: nullableTextColumn(row, 'failure_reason'),
    // An event stored before migration 20261127000101 has no amount_refunded: nothing was refunded then.
    amountRefunded: row.amount_refunded === undefined ? '0.00' : numericColumn(row, 'amount_refunded'),
    createdAt: timeColumn(row, 'created_at'),
    updatedAt: timeColumn(row, 'updated_at'),
  };
}

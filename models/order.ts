import {
  type CreationOptional,
  DataTypes,
  type InferAttributes,
  type InferCreationAttributes,
  Model,
  type Sequelize,
  type Transaction,
} from 'sequelize';
import {
  type Allocated,
  allocatedValues,
  type InsertShape,
  insertGuarded,
  insertOne,
  type SqlValue,
  withAllocated,
} from '../core/sql.js';
import {
  nullableTextColumn,
  numericColumn,
  oneOfColumn,
  type StoredRow,
  textColumn,
  timeColumn,
} from '../core/stored-row.js';
import { notBeforeCreated, timed } from './timestamps.js';

/** The CHECK of orders.status (migration 20261121000003). */
export const ORDER_STATUSES = ['CREATED', 'PAID'] as const;
export type OrderStatus = (typeof ORDER_STATUSES)[number];

/** The columns an order's answer shows, as `Order.insertRow` returns them (a model instance has them too). */
export type OrderRow = Pick<
  Order,
  | 'id'
  | 'merchantOrderNo'
  | 'userId'
  | 'amount'
  | 'currency'
  | 'description'
  | 'status'
  | 'createdAt'
  | 'updatedAt'
>;

/** An order's answer columns from its stored row (`SELECT *`, or an event's snapshot: core/stored-row.ts). */
export function orderFromColumns(row: StoredRow): OrderRow {
  return {
    id: numericColumn(row, 'id'),
    merchantOrderNo: textColumn(row, 'merchant_order_no'),
    userId: numericColumn(row, 'user_id'),
    amount: numericColumn(row, 'amount'),
    currency: textColumn(row, 'currency'),
    description: nullableTextColumn(row, 'description'),
    status: oneOfColumn(row, 'status', ORDER_STATUSES),
    createdAt: timeColumn(row, 'created_at'),
    updatedAt: timeColumn(row, 'updated_at'),
  };
}

export type NewOrder = Pick<
  Order,
  'tenantId' | 'userId' | 'merchantOrderNo' | 'amount' | 'currency' | 'description'
>;

const ORDER_INSERT: InsertShape = {
  table: 'orders',
  columns: [
    ['tenant_id', 'varchar'],
    ['user_id', 'bigint'],
    ['merchant_order_no', 'varchar'],
    ['amount', 'numeric'],
    ['currency', 'varchar'],
    ['description', 'varchar'],
  ],
  returning: `id, merchant_order_no AS "merchantOrderNo", user_id AS "userId", amount, currency,
              description, status, created_at AS "createdAt", updated_at AS "updatedAt"`,
};

/** A create's time from the service's clock, as every path's (models/timestamps.ts). */
const ORDER_INSERT_TIMED = timed(ORDER_INSERT);

const orderValues = (v: NewOrder): SqlValue[] => [
  v.tenantId,
  v.userId,
  v.merchantOrderNo,
  v.amount,
  v.currency,
  v.description,
];

export class Order extends Model<InferAttributes<Order>, InferCreationAttributes<Order>> {
  declare id: CreationOptional<string>;
  declare tenantId: string;
  declare userId: string;
  declare merchantOrderNo: string;
  /** NUMERIC comes back from pg as a string ("10.50"): never a float. */
  declare amount: string;
  declare currency: string;
  declare description: string | null;
  declare status: CreationOptional<OrderStatus>;
  declare createdAt: CreationOptional<Date>;
  declare updatedAt: CreationOptional<Date>;

  /**
   * One `INSERT ... RETURNING` of the answer's columns: the hot path of a create (see
   * `User.insertRow`). A taken merchantOrderNo throws the driver's unique violation.
   */
  static async insertRow(values: NewOrder, transaction?: Transaction): Promise<OrderRow> {
    const at = new Date();
    return insertOne<OrderRow>(
      Order.sequelize!,
      ORDER_INSERT_TIMED,
      [...orderValues(values), at, at],
      transaction,
    );
  }

  /**
   * The same insert as one literal statement that inserts only where `guard` holds (core/sql.ts);
   * with `allocated`, the row's id and timestamps are those (allocated before the write).
   */
  static insertGuarded(values: NewOrder, guard: string, allocated?: Allocated): string {
    if (!allocated) return insertGuarded(ORDER_INSERT, orderValues(values), guard);
    return insertGuarded(withAllocated(ORDER_INSERT), allocatedValues(orderValues(values), allocated), guard);
  }

  static initModel(sequelize: Sequelize): void {
    Order.init(
      {
        id: { type: DataTypes.BIGINT, primaryKey: true, autoIncrement: true },
        tenantId: { type: DataTypes.STRING(36), allowNull: false },
        userId: { type: DataTypes.BIGINT, allowNull: false },
        merchantOrderNo: { type: DataTypes.STRING(64), allowNull: false },
        amount: { type: DataTypes.DECIMAL(14, 2), allowNull: false },
        currency: { type: DataTypes.CHAR(3), allowNull: false },
        description: { type: DataTypes.STRING(200), allowNull: true },
        status: { type: DataTypes.STRING(10), allowNull: false, defaultValue: 'CREATED' },
        createdAt: DataTypes.DATE,
        updatedAt: DataTypes.DATE,
      },
      { sequelize, tableName: 'orders', underscored: true, hooks: { beforeUpdate: notBeforeCreated } },
    );
  }
}

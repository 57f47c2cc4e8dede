import {
  type CreationOptional,
  DataTypes,
  type InferAttributes,
  type InferCreationAttributes,
  Model,
  type Sequelize,
  type Transaction,
} from 'sequelize';
import { sqlRows } from '../core/sql.js';

export type OrderStatus = 'CREATED' | 'PAID';

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
type NewOrder = Pick<
  Order,
  'tenantId' | 'userId' | 'merchantOrderNo' | 'amount' | 'currency' | 'description'
>;

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
    const rows = await sqlRows<OrderRow>(
      Order.sequelize!,
      `INSERT INTO orders (tenant_id, user_id, merchant_order_no, amount, currency, description)
       VALUES ($1, $2, $3, $4, $5, $6)
       RETURNING id, merchant_order_no AS "merchantOrderNo", user_id AS "userId", amount, currency,
                 description, status, created_at AS "createdAt", updated_at AS "updatedAt"`,
      [
        values.tenantId,
        values.userId,
        values.merchantOrderNo,
        values.amount,
        values.currency,
        values.description,
      ],
      transaction,
    );
    const row = rows[0];
    if (!row) throw new Error('INSERT INTO orders returned no row');
    return row;
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
      { sequelize, tableName: 'orders', underscored: true },
    );
  }
}

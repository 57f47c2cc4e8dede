import {
  type CreationOptional,
  DataTypes,
  type InferAttributes,
  type InferCreationAttributes,
  Model,
  type Sequelize,
} from 'sequelize';

export type OrderStatus = 'CREATED' | 'PAID';

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

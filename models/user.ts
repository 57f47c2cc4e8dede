import {
  type CreationOptional,
  DataTypes,
  type InferAttributes,
  type InferCreationAttributes,
  Model,
  type Sequelize,
  type Transaction,
} from 'sequelize';
import type { Role } from '../core/identity.js';

export type { Role };
export type UserStatus = 'ACTIVE' | 'DISABLED';

export class User extends Model<InferAttributes<User>, InferCreationAttributes<User>> {
  declare id: CreationOptional<string>;
  declare tenantId: string;
  declare name: string;
  declare age: number;
  declare username: string | null;
  declare email: string | null;
  declare passwordHash: string | null;
  declare passwordSalt: string | null;
  declare role: CreationOptional<Role>;
  declare status: CreationOptional<UserStatus>;
  declare createdAt: CreationOptional<Date>;
  declare updatedAt: CreationOptional<Date>;

  static findInTenant(tenantId: string, id: string, transaction?: Transaction): Promise<User | null> {
    return User.findOne({ where: { tenantId, id }, transaction });
  }

  static initModel(sequelize: Sequelize): void {
    User.init(
      {
        id: { type: DataTypes.BIGINT, primaryKey: true, autoIncrement: true },
        tenantId: { type: DataTypes.STRING(36), allowNull: false },
        name: { type: DataTypes.STRING(100), allowNull: false },
        age: { type: DataTypes.SMALLINT, allowNull: false },
        username: { type: DataTypes.STRING(50), allowNull: true },
        email: { type: DataTypes.STRING(254), allowNull: true },
        passwordHash: { type: DataTypes.STRING(128), allowNull: true },
        passwordSalt: { type: DataTypes.STRING(64), allowNull: true },
        role: { type: DataTypes.STRING(10), allowNull: false, defaultValue: 'user' },
        status: { type: DataTypes.STRING(10), allowNull: false, defaultValue: 'ACTIVE' },
        createdAt: DataTypes.DATE,
        updatedAt: DataTypes.DATE,
      },
      { sequelize, tableName: 'users', underscored: true },
    );
  }
}

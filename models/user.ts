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
import {
  type Allocated,
  allocatedValues,
  type InsertShape,
  insertGuarded,
  insertOne,
  type SqlValue,
  sqlRows,
  withAllocated,
} from '../core/sql.js';
import { notBeforeCreated, timed } from './timestamps.js';

export type { Role };
export type UserStatus = 'ACTIVE' | 'DISABLED';

/** The columns a user's answer shows, as `User.insertRow` returns them (a model instance has them too). */
export type UserRow = Pick<
  User,
  'id' | 'name' | 'age' | 'username' | 'email' | 'role' | 'status' | 'createdAt' | 'updatedAt'
>;
export type NewUser = Pick<
  User,
  'tenantId' | 'name' | 'age' | 'username' | 'email' | 'passwordHash' | 'passwordSalt'
> & { role: Role; status: UserStatus };

const USER_INSERT: InsertShape = {
  table: 'users',
  columns: [
    ['tenant_id', 'varchar'],
    ['name', 'varchar'],
    ['age', 'smallint'],
    ['username', 'varchar'],
    ['email', 'varchar'],
    ['password_hash', 'varchar'],
    ['password_salt', 'varchar'],
    ['role', 'varchar'],
    ['status', 'varchar'],
  ],
  returning:
    'id, name, age, username, email, role, status, created_at AS "createdAt", updated_at AS "updatedAt"',
};

/**
 * Who a keyless create acts for, checked by its own statement: the token's user and role, and
 * whether only an admin may write (routers/auth/who.ts userCheck).
 */
export interface UserCheck {
  tenantId: string;
  userId: string;
  tokenRole: Role;
  adminOnly: boolean;
}

/** user_insert_checked (migration 20261125000001): the insert with the user row's rule, plan kept per session. */
const INSERT_CHECKED = `SELECT * FROM user_insert_checked($1::text, $2::text, $3::smallint, $4::text, $5::text,
  $6::text, $7::text, $8::text, $9::text, $10::bigint, $11::text, $12::boolean, $13::timestamptz)`;

/**
 * Every create's time comes from the service's clock (here, or models/id-blocks.ts for a keyed
 * create), never from the database's default: one source whatever the path (issue 26, defect 3).
 */
const USER_INSERT_TIMED = timed(USER_INSERT);

const userValues = (v: NewUser): SqlValue[] => [
  v.tenantId,
  v.name,
  v.age,
  v.username,
  v.email,
  v.passwordHash,
  v.passwordSalt,
  v.role,
  v.status,
];

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

  /**
   * One `INSERT ... RETURNING` of the answer's columns: the hot path of a create. Same table, same
   * constraints and defaults (but the timestamps: the service's clock) as `User.create`, without building and
   * validating a model instance (Sequelize's own cost per row; docs/BENCHMARKS.md). A duplicate
   * username or email throws the driver's unique violation (23505, naming the constraint).
   */
  static async insertRow(values: NewUser, transaction?: Transaction): Promise<UserRow> {
    const at = new Date();
    return insertOne<UserRow>(
      User.sequelize!,
      USER_INSERT_TIMED,
      [...userValues(values), at, at],
      transaction,
    );
  }

  /**
   * The same insert, only where the row of `check`'s user in the new row's tenant admits it (a
   * DISABLED user never; with `adminOnly`, an admin only; no row: the token's role), in one
   * statement: undefined when it did not.
   */
  static async insertChecked(values: NewUser, check: UserCheck): Promise<UserRow | undefined> {
    // The function reads the user's row in the tenant it writes to.
    if (check.tenantId !== values.tenantId) throw new Error('insertChecked: the check is for another tenant');
    const rows = await sqlRows<UserRow>(User.sequelize!, INSERT_CHECKED, [
      ...userValues(values),
      check.userId,
      check.tokenRole,
      check.adminOnly,
      new Date(),
    ]);
    return rows.length === 0 ? undefined : rows[0];
  }

  /**
   * The same insert as one literal statement that inserts only where `guard` holds (core/sql.ts);
   * with `allocated`, the row's id and timestamps are those (allocated before the write).
   */
  static insertGuarded(values: NewUser, guard: string, allocated?: Allocated): string {
    if (!allocated) return insertGuarded(USER_INSERT, userValues(values), guard);
    return insertGuarded(withAllocated(USER_INSERT), allocatedValues(userValues(values), allocated), guard);
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
      { sequelize, tableName: 'users', underscored: true, hooks: { beforeUpdate: notBeforeCreated } },
    );
  }
}

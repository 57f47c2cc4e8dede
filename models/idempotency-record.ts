import {
  type CreationOptional,
  DataTypes,
  type InferAttributes,
  type InferCreationAttributes,
  Model,
  type Sequelize,
} from 'sequelize';

export type RecordStatus = 'PROCESSING' | 'SUCCEEDED' | 'FAILED_RETRYABLE' | 'FAILED_FINAL';

/**
 * The idempotency record (spec section 2.4). The engine's hot path uses hand-written SQL
 * (idempotency/record-store.ts) for its conditional writes; this model serves reads and tools.
 */
export class IdempotencyRecord extends Model<
  InferAttributes<IdempotencyRecord>,
  InferCreationAttributes<IdempotencyRecord>
> {
  declare scopeKey: string;
  declare requestHash: string;
  declare status: RecordStatus;
  declare resourceId: string | null;
  declare responseBody: string | null;
  declare httpStatus: number | null;
  declare ownerToken: string | null;
  declare leaseUntil: Date | null;
  declare userScope: string;
  declare operation: string;
  declare createdAt: CreationOptional<Date>;
  declare updatedAt: CreationOptional<Date>;
  declare expiresAt: Date;

  static initModel(sequelize: Sequelize): void {
    IdempotencyRecord.init(
      {
        scopeKey: { type: DataTypes.STRING(200), primaryKey: true },
        requestHash: { type: DataTypes.STRING(64), allowNull: false },
        status: { type: DataTypes.STRING(20), allowNull: false },
        resourceId: { type: DataTypes.STRING(100), allowNull: true },
        responseBody: { type: DataTypes.TEXT, allowNull: true },
        httpStatus: { type: DataTypes.SMALLINT, allowNull: true },
        ownerToken: { type: DataTypes.STRING(64), allowNull: true },
        leaseUntil: { type: DataTypes.DATE, allowNull: true },
        userScope: { type: DataTypes.STRING(60), allowNull: false },
        operation: { type: DataTypes.STRING(40), allowNull: false },
        createdAt: DataTypes.DATE,
        updatedAt: DataTypes.DATE,
        expiresAt: { type: DataTypes.DATE, allowNull: false },
      },
      { sequelize, tableName: 'idempotency_records', underscored: true },
    );
  }
}

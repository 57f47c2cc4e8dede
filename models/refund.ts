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

/** The CHECK of refunds.status (migration 20261127000101). */
export const REFUND_STATUSES = ['PROCESSING', 'SUCCEEDED', 'FAILED'] as const;
export type RefundStatus = (typeof REFUND_STATUSES)[number];

/** A refund of part or all of a payment (CONTRACT section 10); migration 20261127000101. */
export class Refund extends Model<InferAttributes<Refund>, InferCreationAttributes<Refund>> {
  declare id: string;
  /** Generated once; the gateway's idempotency key on every attempt. */
  declare refundNo: string;
  declare paymentId: string;
  declare merchantId: string;
  /** The payment's owner (the order's owner), also when an admin refunds. */
  declare userId: string;
  declare merchantOrderNo: string;
  declare amount: string;
  declare currency: string;
  declare reason: string | null;
  declare status: CreationOptional<RefundStatus>;
  declare failureReason: CreationOptional<string | null>;
  /** The gateway's refundId once it answered. */
  declare gatewayRefundId: CreationOptional<string | null>;
  /** Set while the refund is resumable: its last attempt certainly refunded nothing. */
  declare resumableSince: CreationOptional<Date | null>;
  declare createdAt: CreationOptional<Date>;
  declare updatedAt: CreationOptional<Date>;

  /** The refund's INSERT as one escaped statement, sent with Tx 1's COMMIT (as Payment.insertStatement). */
  static insertStatement(r: Refund): string {
    return `INSERT INTO refunds (id, refund_no, payment_id, merchant_id, user_id, merchant_order_no, amount,
       currency, reason, status, failure_reason, gateway_refund_id, resumable_since, created_at, updated_at)
     VALUES (${[
       r.id,
       r.refundNo,
       r.paymentId,
       r.merchantId,
       r.userId,
       r.merchantOrderNo,
       r.amount,
       r.currency,
       r.reason,
       r.status,
       r.failureReason,
       r.gatewayRefundId,
       r.resumableSince,
       r.createdAt,
       r.updatedAt,
     ]
       .map(sqlLiteral)
       .join(', ')});`;
  }

  static initModel(sequelize: Sequelize): void {
    Refund.init(
      {
        id: { type: DataTypes.STRING(100), primaryKey: true },
        refundNo: { type: DataTypes.STRING(64), allowNull: false },
        paymentId: { type: DataTypes.STRING(100), allowNull: false },
        merchantId: { type: DataTypes.STRING(36), allowNull: false },
        userId: { type: DataTypes.BIGINT, allowNull: false },
        merchantOrderNo: { type: DataTypes.STRING(64), allowNull: false },
        amount: { type: DataTypes.DECIMAL(14, 2), allowNull: false },
        currency: { type: DataTypes.CHAR(3), allowNull: false },
        reason: { type: DataTypes.STRING(200), allowNull: true },
        status: { type: DataTypes.STRING(12), allowNull: false, defaultValue: 'PROCESSING' },
        failureReason: { type: DataTypes.STRING(40), allowNull: true },
        gatewayRefundId: { type: DataTypes.STRING(100), allowNull: true },
        resumableSince: { type: DataTypes.DATE, allowNull: true },
        createdAt: DataTypes.DATE,
        updatedAt: DataTypes.DATE,
      },
      { sequelize, tableName: 'refunds', underscored: true },
    );
  }
}

/** The columns a refund's answer shows (payments/refund-reply.ts); a Refund instance has them. */
export type RefundRow = Pick<
  Refund,
  | 'id'
  | 'refundNo'
  | 'paymentId'
  | 'merchantOrderNo'
  | 'amount'
  | 'currency'
  | 'reason'
  | 'status'
  | 'failureReason'
  | 'createdAt'
  | 'updatedAt'
>;

/** A refund's answer columns from its stored row (an event's snapshot: core/stored-row.ts). */
export function refundFromColumns(row: StoredRow): RefundRow {
  return {
    id: textColumn(row, 'id'),
    refundNo: textColumn(row, 'refund_no'),
    paymentId: textColumn(row, 'payment_id'),
    merchantOrderNo: textColumn(row, 'merchant_order_no'),
    amount: numericColumn(row, 'amount'),
    currency: textColumn(row, 'currency'),
    reason: nullableTextColumn(row, 'reason'),
    status: oneOfColumn(row, 'status', REFUND_STATUSES),
    failureReason: nullableTextColumn(row, 'failure_reason'),
    createdAt: timeColumn(row, 'created_at'),
    updatedAt: timeColumn(row, 'updated_at'),
  };
}

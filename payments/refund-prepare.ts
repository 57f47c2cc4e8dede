import { randomBytes } from 'node:crypto';
import { Conflict, Forbidden, NotFound } from '../core/errors.js';
import type { Identity } from '../core/identity.js';
import { canonicalAmount } from '../core/money.js';
import { sqlLiteral } from '../core/sql.js';
import type { Prepared } from '../idempotency/effect.js';
import { Refund } from '../models/refund.js';
import type { CreateRefundInput } from './refund.schema.js';

export interface RefundRequest {
  auth: Identity;
  input: CreateRefundInput;
}

/** What a refund sends to the gateway besides its own fields: the charge it undoes part of. */
export interface ChargeOfRefund {
  paymentNo: string;
  chargeId: string;
}

/** The charge of each refund this process prepared or read (so perform and query need no read). */
export const chargeOfRefund = new WeakMap<Refund, ChargeOfRefund>();

/** The row of `refundLookupStatement`: the payment, locked, and what its refunds have taken. */
export interface RefundLookupRow {
  userId: string;
  merchantOrderNo: string;
  amount: string;
  currency: string;
  status: string;
  paymentNo: string;
  chargeId: string | null;
  /** The sum of its SUCCEEDED and PROCESSING refunds, read after the lock. */
  taken: string;
}

/**
 * The payment of a refund, locked, and the sum of its refunds: one read (`idem_refund_lookup`,
 * migration 20261127000801), as text with escaped literals so that it rides in Tx 1's claim round
 * trip, after the claim. It locks and reads only when this key's claim happened in this transaction.
 */
export function refundLookupStatement(scopeKey: string, { auth, input }: RefundRequest): string {
  return `SELECT * FROM idem_refund_lookup(${sqlLiteral(scopeKey)}, ${sqlLiteral(input.id)}, ${sqlLiteral(auth.tenantId)});`;
}

/** Money as integer cents, so that no float ever adds it up. */
const cents = (amount: string) => BigInt(canonicalAmount(amount).replace('.', ''));
const fromCents = (c: bigint) => `${c / 100n}.${(c % 100n).toString().padStart(2, '0')}`;

/**
 * Tx 1 of a refund (CONTRACT section 10): the checks in its order (no payment or another tenant's →
 * 404; not the order's owner and not an admin → 403; payment not SUCCEEDED → 409/40903; more than
 * what is left → 409/40906), then the new PROCESSING refund, not yet written (its INSERT rides with
 * Tx 1's COMMIT). `payment` is the lookup's row (`refundLookupStatement`, in the claim's round trip).
 *
 * The strict cap: the lookup locks the payment's row (FOR UPDATE) before it sums its refunds, and the
 * lock is held until Tx 1 commits the new refund, so concurrent refunds of one payment (any keys, any
 * instances) are summed one after the other. The sum is a statement of its own in the lookup's
 * function, after the lock: under READ COMMITTED a VOLATILE function's statement takes a new snapshot,
 * which sees every refund committed by the transactions that held the lock before (a sum in the
 * locking statement would use the snapshot taken before the wait). The wait is bounded by the
 * session's lock_timeout (503 when it ends).
 */
export function prepareRefund(
  payment: RefundLookupRow | undefined,
  { auth, input }: RefundRequest,
): Prepared<Refund> {
  if (!payment) return { kind: 'refused', error: new NotFound('Payment not found') };
  if (auth.role !== 'admin' && payment.userId !== auth.userId)
    return { kind: 'refused', error: new Forbidden('Not your payment') };
  if (payment.status !== 'SUCCEEDED' || !payment.chargeId) {
    const message = `Payment is ${payment.status}: only a SUCCEEDED payment can be refunded`;
    return { kind: 'refused', error: new Conflict('state_conflict', message) };
  }
  const left = cents(payment.amount) - cents(payment.taken);
  const wanted = input.amount === undefined ? left : cents(input.amount);
  if (wanted <= 0n || wanted > left) {
    const message = `Refund exceeds what is left to refund of the payment (${fromCents(left > 0n ? left : 0n)} ${payment.currency})`;
    return { kind: 'refused', error: new Conflict('refund_exceeds', message) };
  }
  const now = new Date();
  const refund = Refund.build(
    {
      id: `re_${randomBytes(12).toString('hex')}`,
      refundNo: `RN${Date.now().toString(36)}${randomBytes(10).toString('hex')}`,
      paymentId: input.id,
      merchantId: auth.tenantId,
      // The payment's owner, also when an admin refunds: the refund is theirs to read.
      userId: payment.userId,
      merchantOrderNo: payment.merchantOrderNo,
      amount: fromCents(wanted),
      currency: payment.currency,
      reason: input.reason ?? null,
      status: 'PROCESSING',
      failureReason: null,
      gatewayRefundId: null,
      resumableSince: null,
      createdAt: now,
      updatedAt: now,
    },
    // raw: timestamps are Sequelize's read-only attributes, which a plain set() would skip.
    { isNewRecord: false, raw: true },
  );
  chargeOfRefund.set(refund, { paymentNo: payment.paymentNo, chargeId: payment.chargeId });
  return { kind: 'new', row: refund, insert: Refund.insertStatement(refund) };
}

import { sqlRows } from '../core/sql.js';
import type { Charge } from '../gateway/types.js';
import type { Lease } from '../idempotency/lease.js';
import type { Reply } from '../idempotency/outcome.js';
import type { Payment } from '../models/payment.js';
import type { PaymentDeps } from './payment-deps.js';
import { paymentReply } from './payment-reply.js';

/**
 * Tx 2: payment, order and record move together to the charge's outcome, only while the lease is
 * ours (the mechanism's Tx 2: idempotency/effect-settle.ts). One statement (atomic by itself, so no transaction and one round trip), `idem_finish_payment`
 * (migration 20261124000002): the record's conditional update on our owner token decides, and the
 * slot's, the payment's and the order's updates happen only if it did. Fenced off: someone took over
 * after our lease ended; they own the outcome now and nothing is written.
 */
export async function finalisePayment(
  deps: PaymentDeps,
  lease: Lease,
  payment: Payment,
  charge: Charge,
): Promise<Reply | undefined> {
  const succeeded = charge.status === 'SUCCEEDED';
  // The row as Tx 2 writes it, so that the stored answer is built from exactly what is written.
  payment.set(
    {
      status: succeeded ? 'SUCCEEDED' : 'FAILED',
      failureReason: succeeded ? null : 'DECLINED',
      chargeId: charge.chargeId,
      resumableSince: null,
      updatedAt: new Date(),
    },
    // raw: updatedAt is read-only to a plain set() on a stored row, and it must move here.
    { raw: true },
  );
  const reply = paymentReply(payment);
  // The record's binds ($1..$5: scope key, owner, status, HTTP status, sealed reply) as finishParts makes them.
  const record = deps.engine.leases.finishParts(lease, 'SUCCEEDED', reply);
  const rows = await sqlRows<{ n: number }>(
    deps.sequelize,
    'SELECT idem_finish_payment($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) AS n',
    [
      ...record.bind,
      payment.status,
      payment.failureReason,
      payment.chargeId,
      payment.updatedAt,
      payment.id,
      payment.orderId,
      succeeded,
    ],
  );
  if (Number(rows[0]?.n) === 1) return reply;
  // Fenced: the instance holds what Tx 2 would have written; read back what the database has.
  await payment.reload();
  return undefined;
}

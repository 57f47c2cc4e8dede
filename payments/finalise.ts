import type { Charge } from '../gateway/types.js';
import type { Lease } from '../idempotency/lease.js';
import type { Reply } from '../idempotency/outcome.js';
import type { Payment } from '../models/payment.js';
import type { PaymentDeps } from './payment-deps.js';
import { paymentReply } from './payment-reply.js';

/**
 * Tx 2: payment, order and record move together to the charge's outcome, only while the lease is
 * ours (the mechanism's Tx 2: idempotency/effect-settle.ts), as one statement (lease.ts finishWith):
 * `idem_finish_payment` (migration 20261124000002) updates the record on our owner token, and the
 * slot, the payment and the order only if that happened. Fenced off: someone took over after our
 * lease ended; they own the outcome now and nothing is written.
 */
export async function finalisePayment(
  deps: PaymentDeps,
  lease: Lease,
  payment: Payment,
  charge: Charge,
): Promise<Reply | undefined> {
  const succeeded = charge.status === 'SUCCEEDED';
  // The row as Tx 2 writes it, so that the stored answer is built from exactly what is written.
  // raw: updatedAt is read-only to a plain set() on a stored row, and it must move here.
  payment.set(
    {
      status: succeeded ? 'SUCCEEDED' : 'FAILED',
      failureReason: succeeded ? null : 'DECLINED',
      chargeId: charge.chargeId,
      resumableSince: null,
      updatedAt: new Date(),
    },
    { raw: true },
  );
  const reply = paymentReply(payment);
  const { status, failureReason, chargeId, updatedAt, id, orderId } = payment;
  const args = [status, failureReason, chargeId, updatedAt, id, orderId, succeeded];
  if (await deps.engine.leases.finishWith(lease, reply, 'idem_finish_payment', args)) return reply;
  // Fenced: the instance holds what Tx 2 would have written; read back what the database has.
  await payment.reload();
  return undefined;
}

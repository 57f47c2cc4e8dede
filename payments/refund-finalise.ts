import type { BusinessRefund } from '../gateway/types.js';
import type { Lease } from '../idempotency/lease.js';
import type { Reply } from '../idempotency/outcome.js';
import type { Refund } from '../models/refund.js';
import type { PaymentDeps } from './payment-deps.js';
import { refundReply } from './refund-reply.js';

/**
 * Tx 2 of a refund, fenced on the lease's owner token, as one statement (lease.ts finishWith):
 * `idem_finish_refund` (migration 20261127000801). The record's conditional update decides; only if
 * it happened does the refund become final and, when the gateway refunded, the payment's
 * amount_refunded grow by the refund's amount (CONTRACT section 10: "in the same transaction"). The
 * refund's update also requires it to be PROCESSING, and the payment's follows from the refund's, so
 * no path can add one refund's amount twice. Fenced off: nothing is written.
 */
export async function finaliseRefund(
  deps: PaymentDeps,
  lease: Lease,
  refund: Refund,
  result: BusinessRefund,
): Promise<Reply | undefined> {
  const succeeded = result.status === 'SUCCEEDED';
  // raw: updatedAt is read-only to a plain set() on a stored row, and it must move here.
  refund.set(
    {
      status: succeeded ? 'SUCCEEDED' : 'FAILED',
      failureReason: succeeded ? null : 'DECLINED',
      gatewayRefundId: result.refundId,
      resumableSince: null,
      updatedAt: new Date(),
    },
    { raw: true },
  );
  const reply = refundReply(refund);
  const { status, failureReason, gatewayRefundId, updatedAt, id } = refund;
  const args = [status, failureReason, gatewayRefundId, updatedAt, id, succeeded];
  if (await deps.engine.leases.finishWith(lease, reply, 'idem_finish_refund', args)) return reply;
  // Fenced: the instance holds what Tx 2 would have written; read back what the database has.
  await refund.reload();
  return undefined;
}

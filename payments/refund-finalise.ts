import { sqlRows } from '../core/sql.js';
import type { BusinessRefund } from '../gateway/types.js';
import type { Lease } from '../idempotency/lease.js';
import type { Reply } from '../idempotency/outcome.js';
import type { Refund } from '../models/refund.js';
import type { PaymentDeps } from './payment-deps.js';
import { refundReply } from './refund-reply.js';

/**
 * Tx 2 of a refund, fenced on the lease's owner token: one statement (atomic by itself, one round
 * trip), `idem_finish_refund` (migration 20261127000801). The record's conditional update (as
 * idempotency/lease.ts finishParts) decides; only if it happened does the refund become final and,
 * when the gateway refunded, the payment's amount_refunded grow by the refund's amount (CONTRACT
 * section 10: "in the same transaction"). The refund's update also requires it to be PROCESSING, and
 * the payment's follows from the refund's, so no path can add one refund's amount twice. Fenced off:
 * nothing is written.
 */
export async function finaliseRefund(
  deps: PaymentDeps,
  lease: Lease,
  refund: Refund,
  result: BusinessRefund,
): Promise<Reply | undefined> {
  const succeeded = result.status === 'SUCCEEDED';
  refund.set(
    {
      status: succeeded ? 'SUCCEEDED' : 'FAILED',
      failureReason: succeeded ? null : 'DECLINED',
      gatewayRefundId: result.refundId,
      resumableSince: null,
      updatedAt: new Date(),
    },
    // raw: updatedAt is read-only to a plain set() on a stored row, and it must move here.
    { raw: true },
  );
  const reply = refundReply(refund);
  // The record's binds ($1..$5: scope key, owner, status, HTTP status, sealed reply) as finishParts makes them.
  const record = deps.engine.leases.finishParts(lease, 'SUCCEEDED', reply);
  const rows = await sqlRows<{ n: number }>(
    deps.sequelize,
    'SELECT idem_finish_refund($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) AS n',
    [
      ...record.bind,
      refund.status,
      refund.failureReason,
      refund.gatewayRefundId,
      refund.updatedAt,
      refund.id,
      succeeded,
    ],
  );
  if (Number(rows[0]?.n) === 1) return reply;
  // Fenced: the instance holds what Tx 2 would have written; read back what the database has.
  await refund.reload();
  return undefined;
}

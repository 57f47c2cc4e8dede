import { failpoint } from '../core/failpoints.js';
import { sqlRows } from '../core/sql.js';
import type { Charge } from '../gateway/types.js';
import type { Lease } from '../idempotency/lease.js';
import type { Reply } from '../idempotency/outcome.js';
import type { Payment } from '../models/payment.js';
import type { PaymentDeps } from './payment-deps.js';
import { paymentReply } from './payment-reply.js';

export type Finalised = { kind: 'final'; reply: Reply } | { kind: 'fenced' };

/**
 * Tx 2: payment, order and record move together to the charge's outcome, only while the lease is
 * ours. One statement (atomic by itself, so no transaction and one round trip): the record's
 * conditional update on our owner token decides, and the payment's and order's updates happen only
 * if it did. Fenced off: someone took over after our lease ended; they own the outcome now and
 * nothing is written.
 */
export async function finalisePayment(
  deps: PaymentDeps,
  lease: Lease,
  payment: Payment,
  charge: Charge,
): Promise<Finalised> {
  const succeeded = charge.status === 'SUCCEEDED';
  await failpoint('payment.tx2.before');
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
  const record = deps.engine.leases.finishParts(lease, 'SUCCEEDED', reply);
  const rows = await sqlRows<{ n: string }>(
    deps.sequelize,
    `WITH ${record.ctes},
     paid AS (UPDATE payments SET status = $6, failure_reason = $7, charge_id = $8, resumable_since = NULL,
                     updated_at = $9
              WHERE id = $10 AND EXISTS (SELECT 1 FROM done) RETURNING 1),
     ordered AS (UPDATE orders SET status = 'PAID', updated_at = $9
                 WHERE id = $11 AND $12 AND EXISTS (SELECT 1 FROM done) RETURNING 1)
     ${record.select}`,
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
  const finalised: Finalised = Number(rows[0]?.n) === 1 ? { kind: 'final', reply } : { kind: 'fenced' };
  await failpoint('payment.tx2.after');
  // Fenced: the instance holds what Tx 2 would have written; read back what the database has.
  if (finalised.kind === 'fenced') await payment.reload();
  return finalised;
}

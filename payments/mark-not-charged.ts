import { inTransaction } from '../core/database.js';
import type { Lease } from '../idempotency/lease.js';
import { Payment } from '../models/payment.js';
import type { PaymentDeps } from './payment-deps.js';

/**
 * The attempt certainly charged nothing. Together, fenced on our owner token: the record becomes
 * FAILED_RETRYABLE (a retry with the same key executes again) and the payment becomes resumable (the
 * next request for its order, with any key, executes it again: CONTRACT section 3). false: fenced
 * off, someone took the attempt over and owns its outcome; nothing was written.
 */
export function markNotCharged(deps: PaymentDeps, lease: Lease, payment: Payment): Promise<boolean> {
  return inTransaction<boolean>(deps.sequelize, async (t) => {
    if (!(await deps.engine.leases.markRetryable(lease, t))) return { rollback: false };
    await Payment.update(
      { resumableSince: new Date() },
      { where: { id: payment.id, status: 'PROCESSING' }, transaction: t },
    );
    return { commit: true };
  });
}

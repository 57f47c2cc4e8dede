import type { Lease } from '../idempotency/lease.js';
import type { PaymentDeps } from './payment-deps.js';

/**
 * The attempt certainly charged nothing: the record becomes FAILED_RETRYABLE (fenced on our owner
 * token), so a retry with the same key executes again instead of replaying a failure.
 */
export async function markNotCharged(deps: PaymentDeps, lease: Lease): Promise<void> {
  await deps.engine.leases.markRetryable(lease);
}

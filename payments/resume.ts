import type { Lease } from '../idempotency/lease.js';
import type { PaymentDeps } from './payment-deps.js';

/**
 * A retry takes back its own FAILED_RETRYABLE record: the last attempt certainly charged nothing
 * (503), so the payment may be executed again with the same paymentNo, after asking the gateway.
 * The same conditional update as a takeover (the record has no owner), so one retry wins.
 */
export function resumePayment(deps: PaymentDeps, scopeKey: string): Promise<Lease | undefined> {
  return deps.engine.leases.takeOver(scopeKey, null);
}

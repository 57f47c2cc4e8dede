import { failpoint } from '../core/failpoints.js';
import type { PaymentDeps } from './payment-deps.js';
import { settlePayment } from './settle.js';
import { paymentOfRecord, takeOverPayment } from './take-over.js';

export const PAYMENT_OPERATION = 'payments.create';

/**
 * Finishes payments whose executor died or gave up (PROCESSING past its lease), so a payment
 * becomes final even when its client never retries. Runs in every instance at once: the takeover
 * is a conditional update with one winner, and the winner asks the gateway before charging.
 * Returns how many records it took over.
 */
export async function recoverExpiredPayments(
  deps: PaymentDeps,
  batch = 20,
  onError: (scopeKey: string, err: unknown) => void = () => {},
): Promise<number> {
  const expired = await deps.engine.leases.findExpired(PAYMENT_OPERATION, batch);
  let taken = 0;
  for (const record of expired) {
    const { resourceId } = record;
    if (!resourceId) continue;
    // One payment that fails (its row gone, the database busy) must not stop the others: its lease
    // ends by itself and the next round tries it again.
    try {
      const lease = await takeOverPayment(deps, record.scopeKey, record.ownerToken);
      if (!lease) continue;
      taken += 1;
      await failpoint('recoverer.takeover');
      const payment = await paymentOfRecord(resourceId);
      const settlement = await settlePayment(deps, lease, payment, 'query');
      // Gateway down right now: end our lease so the next round (here or elsewhere) tries again. The
      // payment is not made resumable: its client was answered 202 (or nothing), not "not charged".
      if (settlement.kind === 'not_charged') await deps.engine.leases.release(lease);
    } catch (err) {
      onError(record.scopeKey, err);
    }
  }
  return taken;
}

import { findExpiredLeases, releaseLease, takeOver } from '../idempotency/lease.js';
import { Payment } from '../models/payment.js';
import { type PaymentDeps, resolvePayment } from './create-payment.js';

export const PAYMENT_OPERATION = 'payments.create';

/**
 * Finishes payments whose executor died or gave up (PROCESSING past its lease), so a payment
 * becomes final even when its client never retries. Runs in every instance at once: the takeover
 * is a conditional update with one winner, and the winner asks the gateway before charging.
 * Returns how many records it took over.
 */
export async function recoverExpiredPayments(deps: PaymentDeps, batch = 20): Promise<number> {
  const expired = await findExpiredLeases(deps.sequelize, PAYMENT_OPERATION, batch);
  let taken = 0;
  for (const lease of expired) {
    if (!lease.resourceId) continue;
    const owner = await takeOver(
      deps.sequelize,
      lease.scopeKey,
      lease.ownerToken,
      deps.config.IDEMPOTENCY_LEASE_MS,
    );
    if (!owner) continue;
    taken += 1;
    deps.engine.report(PAYMENT_OPERATION, 'lease_takeover');
    const payment = await Payment.findByPk(lease.resourceId);
    if (!payment) continue;
    const resolution = await resolvePayment(deps, lease.scopeKey, owner, payment, true);
    if (resolution.kind === 'not-charged') {
      // Gateway down right now: end our lease so the next round (here or elsewhere) tries again.
      await releaseLease(deps.sequelize, lease.scopeKey, owner);
    }
  }
  return taken;
}

import { sweepExpired } from '../idempotency/effect-recover.js';
import type { PaymentDeps } from './payment-deps.js';
import { PAYMENT_OPERATION, paymentEffect } from './payment-effect.js';

export { PAYMENT_OPERATION };

/** The recoverer's sweep of payments (idempotency/effect-recover.ts): returns how many it took over. */
export function recoverExpiredPayments(
  deps: PaymentDeps,
  batch = 20,
  onError: (scopeKey: string, err: unknown) => void = () => {},
): Promise<number> {
  return sweepExpired(paymentEffect, deps, batch, onError);
}

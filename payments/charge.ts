import type { ChargeOutcome } from '../gateway/types.js';
import type { Payment } from '../models/payment.js';
import type { PaymentDeps } from './payment-deps.js';

/**
 * The gateway call, outside any transaction (a transaction is never held across a network call),
 * with `Idempotency-Key: paymentNo`: every attempt of one payment is the same charge to the gateway.
 */
export async function chargePayment(deps: PaymentDeps, payment: Payment): Promise<ChargeOutcome> {
  const outcome = await deps.gateway.charge({
    paymentNo: payment.paymentNo,
    amount: String(payment.amount),
    currency: payment.currency,
  });
  deps.onGateway?.('charge', outcome.kind);
  return outcome;
}

import type { QueryOutcome } from '../gateway/types.js';
import type { Payment } from '../models/payment.js';
import type { PaymentDeps } from './payment-deps.js';

/** Asks the gateway what became of the payment's charge (GET /charges/{paymentNo}). */
export async function queryCharge(deps: PaymentDeps, payment: Payment): Promise<QueryOutcome> {
  const outcome = await deps.gateway.query(payment.paymentNo);
  deps.onGateway?.('query', outcome.kind);
  return outcome;
}

import { GatewayError } from '../gateway/client.js';
import type { QueryOutcome } from '../gateway/types.js';
import type { Payment } from '../models/payment.js';
import type { PaymentDeps } from './payment-deps.js';

/** Asks the gateway what became of the payment's charge (GET /charges/{paymentNo}). */
export async function queryCharge(deps: PaymentDeps, payment: Payment): Promise<QueryOutcome> {
  // A 4xx to a query settles nothing: treated as a query that could not be answered.
  const outcome = await deps.gateway.query(payment.paymentNo).catch((err: unknown): QueryOutcome => {
    if (err instanceof GatewayError) return { kind: 'unavailable' };
    throw err;
  });
  deps.onGateway?.('query', outcome.kind);
  return outcome;
}

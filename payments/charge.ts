import { failpoint } from '../core/failpoints.js';
import { GatewayError } from '../gateway/client.js';
import type { ChargeOutcome } from '../gateway/types.js';
import type { Payment } from '../models/payment.js';
import type { PaymentDeps } from './payment-deps.js';

/**
 * The gateway call, outside any transaction (a transaction is never held across a network call),
 * with `Idempotency-Key: paymentNo`: every attempt of one payment is the same charge to the gateway.
 * A 4xx answer means the gateway refused the request and charged nothing: the payment is then
 * resumable like after a 5xx (an operator may fix the cause), never a 500 for the client or an
 * error that stops the recoverer's batch.
 */
export async function chargePayment(deps: PaymentDeps, payment: Payment): Promise<ChargeOutcome> {
  let outcome: ChargeOutcome;
  await failpoint('payment.charge.before');
  try {
    outcome = await deps.gateway.charge({
      paymentNo: payment.paymentNo,
      amount: String(payment.amount),
      currency: payment.currency,
    });
  } catch (err) {
    if (!(err instanceof GatewayError)) throw err;
    outcome = { kind: 'not-charged', reason: 'rejected' };
  }
  deps.onGateway?.('charge', outcome.kind);
  await failpoint('payment.charge.after');
  return outcome;
}

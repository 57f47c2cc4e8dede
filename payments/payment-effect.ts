import type { Identity } from '../core/identity.js';
import { GatewayError } from '../gateway/client.js';
import type { Charge, ChargeOutcome, QueryOutcome } from '../gateway/types.js';
import { type Downstream, defineEffect } from '../idempotency/effect.js';
import { Payment } from '../models/payment.js';
import { finalisePayment } from './finalise.js';
import type { CreatePaymentInput } from './payment.schema.js';
import type { PaymentDeps } from './payment-deps.js';
import { paymentReply } from './payment-reply.js';
import { type LookupRow, paymentLookupStatement, preparePayment } from './prepare.js';

export const PAYMENT_OPERATION = 'payments.create';

/**
 * POST /payments as an effect (CONTRACT sections 3 and 5): the row is the payment, its downstream key
 * the paymentNo, the downstream call the gateway's charge, its finalise `idem_finish_payment`.
 */
export const paymentEffect = defineEffect<
  PaymentDeps,
  { auth: Identity; input: CreatePaymentInput },
  Payment,
  Charge
>({
  name: PAYMENT_OPERATION,
  table: 'payments',
  downstream: 'Payment gateway',
  // The names tests, the chaos schedule and docs/FAULTS.md know.
  failpoints: {
    'tx1.before-commit': 'payment.tx1.before-commit',
    'tx1.after-commit': 'payment.tx1.after-commit',
    'perform.before': 'payment.charge.before',
    'perform.after': 'payment.charge.after',
    'tx2.before': 'payment.tx2.before',
    'tx2.after': 'payment.tx2.after',
    takeover: 'payment.takeover',
    resume: 'payment.resume',
    'recoverer.takeover': 'recoverer.takeover',
  },
  lookup: ({ auth, input }) => paymentLookupStatement(auth, input),
  prepare: (_t, found, { auth, input }) => preparePayment(found[0] as LookupRow | undefined, auth, input),
  read: async (id, t) => (await Payment.findByPk(id, { transaction: t })) ?? undefined,
  perform: (deps, payment) => chargePayment(deps, payment),
  query: (deps, payment) => queryCharge(deps, payment),
  finalise: finalisePayment,
  answer: paymentReply,
});

/**
 * The gateway call with `Idempotency-Key: paymentNo`: every attempt of one payment is the same charge
 * to the gateway. A 4xx answer means the gateway refused the request and charged nothing: the payment
 * is then resumable like after a 5xx (an operator may fix the cause), never a 500 for the client or
 * an error that stops the recoverer's batch.
 */
async function chargePayment(deps: PaymentDeps, payment: Payment): Promise<Downstream<Charge>> {
  let outcome: ChargeOutcome;
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
  if (outcome.kind === 'charged' || outcome.kind === 'declined')
    return { kind: 'done', result: outcome.charge };
  return outcome.kind === 'not-charged' ? { kind: 'not_done' } : { kind: 'unknown' };
}

/** Asks the gateway what became of the payment's charge (GET /charges/{paymentNo}). */
export async function queryCharge(deps: PaymentDeps, payment: Payment): Promise<Downstream<Charge>> {
  // A 4xx to a query settles nothing: treated as a query that could not be answered.
  const outcome = await deps.gateway.query(payment.paymentNo).catch((err: unknown): QueryOutcome => {
    if (err instanceof GatewayError) return { kind: 'unavailable' };
    throw err;
  });
  deps.onGateway?.('query', outcome.kind);
  if (outcome.kind === 'found') return { kind: 'done', result: outcome.charge };
  return outcome.kind === 'none' ? { kind: 'not_done' } : { kind: 'unknown' };
}

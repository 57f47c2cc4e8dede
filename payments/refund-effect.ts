import { GatewayError } from '../gateway/client.js';
import type { BusinessRefund, RefundOutcome, RefundQueryOutcome } from '../gateway/types.js';
import { type Downstream, defineEffect } from '../idempotency/effect.js';
import { Payment } from '../models/payment.js';
import { Refund } from '../models/refund.js';
import type { PaymentDeps } from './payment-deps.js';
import { finaliseRefund } from './refund-finalise.js';
import {
  type ChargeOfRefund,
  chargeOfRefund,
  prepareRefund,
  type RefundLookupRow,
  type RefundRequest,
  refundLookupStatement,
} from './refund-prepare.js';
import { refundReply } from './refund-reply.js';

export const REFUND_OPERATION = 'refunds.create';

/**
 * POST /payments/{id}/refunds as an effect (CONTRACT section 10): the row is the refund, its
 * downstream key the refundNo, the downstream call the gateway's business refund, its finalise one
 * fenced statement that also grows the payment's amount_refunded. No business key: each
 * Idempotency-Key is its own refund, so there is no 'existing'; its lookup (the payment, locked, and
 * the sum of its refunds) rides in the claim's round trip and locks only under this key's claim.
 */
export const refundEffect = defineEffect<PaymentDeps, RefundRequest, Refund, BusinessRefund>({
  name: REFUND_OPERATION,
  table: 'refunds',
  downstream: 'Payment gateway',
  failpoints: {
    'tx1.before-commit': 'refund.tx1.before-commit',
    'tx1.after-commit': 'refund.tx1.after-commit',
    'perform.before': 'refund.perform.before',
    'perform.after': 'refund.perform.after',
    'tx2.before': 'refund.tx2.before',
    'tx2.after': 'refund.tx2.after',
    takeover: 'refund.takeover',
    resume: 'refund.resume',
    'recoverer.takeover': 'recoverer.takeover',
  },
  lookup: (request, scopeKey) => refundLookupStatement(scopeKey, request),
  prepare: (_t, found, request) => prepareRefund(found[0] as RefundLookupRow | undefined, request),
  read: async (id, t) => (await Refund.findByPk(id, { transaction: t })) ?? undefined,
  perform: (deps, refund, signal) => refundAtGateway(deps, refund, signal),
  query: (deps, refund) => queryRefund(deps, refund),
  finalise: finaliseRefund,
  answer: refundReply,
});

/** The charge a refund undoes part of: known from Tx 1, else read from its payment (after a takeover). */
async function chargeOf(refund: Refund): Promise<ChargeOfRefund> {
  let charge = chargeOfRefund.get(refund);
  if (!charge) {
    const payment = await Payment.findByPk(refund.paymentId, { attributes: ['paymentNo', 'chargeId'] });
    if (!payment?.chargeId)
      throw new Error(`payment ${refund.paymentId} of refund ${refund.id} has no charge`);
    charge = { paymentNo: payment.paymentNo, chargeId: payment.chargeId };
    chargeOfRefund.set(refund, charge);
  }
  return charge;
}

/**
 * The gateway call with `Idempotency-Key: refundNo`: every attempt of one refund is the same refund
 * to the gateway. A 4xx means the gateway refused the request and refunded nothing: resumable, as
 * after a 5xx (as payments do).
 */
async function refundAtGateway(
  deps: PaymentDeps,
  refund: Refund,
  signal: AbortSignal,
): Promise<Downstream<BusinessRefund>> {
  const { paymentNo, chargeId } = await chargeOf(refund);
  let outcome: RefundOutcome;
  try {
    outcome = await deps.gateway.refund(
      {
        refundNo: refund.refundNo,
        paymentNo,
        chargeId,
        amount: String(refund.amount),
        currency: refund.currency,
      },
      signal,
    );
  } catch (err) {
    if (!(err instanceof GatewayError)) throw err;
    outcome = { kind: 'not-refunded', reason: 'rejected' };
  }
  deps.onGateway?.('refund', outcome.kind);
  if (outcome.kind === 'refunded' || outcome.kind === 'declined')
    return { kind: 'done', result: outcome.refund };
  return outcome.kind === 'not-refunded' ? { kind: 'not_done' } : { kind: 'unknown' };
}

/** Asks the gateway what became of the refund (GET /refunds/{refundNo}). */
export async function queryRefund(
  deps: Pick<PaymentDeps, 'gateway' | 'onGateway'>,
  refund: Refund,
): Promise<Downstream<BusinessRefund>> {
  // A 4xx to a query settles nothing: treated as a query that could not be answered.
  const outcome = await deps.gateway
    .queryRefund(refund.refundNo)
    .catch((err: unknown): RefundQueryOutcome => {
      if (err instanceof GatewayError) return { kind: 'unavailable' };
      throw err;
    });
  deps.onGateway?.('refund-query', outcome.kind);
  if (outcome.kind === 'found') return { kind: 'done', result: outcome.refund };
  return outcome.kind === 'none' ? { kind: 'not_done' } : { kind: 'unknown' };
}

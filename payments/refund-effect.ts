import type { Config } from '../core/config.js';
import type { BusinessRefund } from '../gateway/types.js';
import { defineEffect } from '../idempotency/effect.js';
import { Payment } from '../models/payment.js';
import { Refund } from '../models/refund.js';
import { gatewayCall } from './gateway-call.js';
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

/** How long a refund's Idempotency-Key lives (its record's TTL), and with it its resumability. */
export const refundKeyTtlHours = (config: Config) => config.PAYMENT_IDEMPOTENCY_TTL_HOURS;

/**
 * POST /payments/{id}/refunds as an effect (CONTRACT section 10): the row is the refund, its
 * downstream key the refundNo, the downstream call the gateway's business refund, its finalise one
 * fenced statement that also grows the payment's amount_refunded. No business key: each
 * Idempotency-Key is its own refund, so there is no 'existing'; its lookup (the payment, locked, and
 * the sum of its refunds) rides in the claim's round trip and locks only under this key's claim.
 * Only its key resumes a refund, so once the key has expired a resumable refund is closed (FAILED,
 * "KEY_EXPIRED": docs/DECISIONS.md "A resumable refund whose key expired").
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
  // The refund with `Idempotency-Key: refundNo`: every attempt of one refund is the same refund.
  perform: async (deps, refund, signal) => {
    const { paymentNo, chargeId } = await chargeOf(refund);
    const { refundNo, amount, currency } = refund;
    const request = { refundNo, paymentNo, chargeId, amount: String(amount), currency };
    return gatewayCall(deps, 'refund', () => deps.gateway.refund(request, signal));
  },
  query: (deps, { refundNo }) => gatewayCall(deps, 'refund-query', () => deps.gateway.queryRefund(refundNo)),
  finalise: finaliseRefund,
  answer: refundReply,
  closedOnKeyExpiry: { failureReason: 'KEY_EXPIRED', ttlHours: refundKeyTtlHours },
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

import type { Identity } from '../core/identity.js';
import type { Charge } from '../gateway/types.js';
import { defineEffect } from '../idempotency/effect.js';
import { Payment } from '../models/payment.js';
import { finalisePayment } from './finalise.js';
import { gatewayCall } from './gateway-call.js';
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
  // The charge with `Idempotency-Key: paymentNo`: every attempt of one payment is the same charge. It
  // stops when our lease ends, as a refund does (its outcome is then unknown: asked first next time).
  perform: (deps, { paymentNo, amount, currency }, signal) =>
    gatewayCall(deps, 'charge', () =>
      deps.gateway.charge({ paymentNo, amount: String(amount), currency }, signal),
    ),
  query: (deps, { paymentNo }) => gatewayCall(deps, 'query', () => deps.gateway.query(paymentNo)),
  finalise: finalisePayment,
  answer: paymentReply,
});

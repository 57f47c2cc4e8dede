import { ok } from '../../core/envelope.js';
import { runEffect } from '../../idempotency/effect-run.js';
import { paymentEffect } from '../../payments/payment-effect.js';
import { paymentCreated } from '../../payments/payment-reply.js';
import { idempotentMutation } from '../idempotent-mutation.js';
import { authedProcedure, router } from '../trpc.js';
import { userRowGate } from '../user-gate.js';
import { getPayment } from './payments.handlers.js';
import { createPaymentInput, getPaymentInput, paymentEnvelope } from './payments.schema.js';

const tags = ['payments'];

export const paymentsRouter = router({
  create: idempotentMutation({
    openapi: {
      method: 'POST',
      path: '/api/v1/payments',
      tags,
      summary: 'Pay an order (201 final; 202 still processing, poll Location)',
    },
    key: 'required',
    mode: 'external',
    checksUserInClaim: true,
    success: paymentCreated,
    nonBusiness: ['traceId'],
    ttlHours: (config) => config.PAYMENT_IDEMPOTENCY_TTL_HOURS,
    input: createPaymentInput,
    output: paymentEnvelope,
    execute: ({ ctx, input, request, failureReply }) =>
      runEffect(
        paymentEffect,
        ctx.services.payments,
        request,
        { auth: ctx.auth, input },
        failureReply,
        ctx.signal,
        userRowGate(ctx, false),
      ),
  }),

  get: authedProcedure
    .meta({
      openapi: {
        method: 'GET',
        path: '/api/v1/payments/{id}',
        tags,
        summary: 'Get a payment (the status query)',
      },
    })
    .input(getPaymentInput)
    .output(paymentEnvelope)
    .query(async ({ ctx, input }) => ok(await getPayment(ctx.auth, input.id))),
});

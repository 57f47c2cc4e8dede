import { ok } from '../../core/envelope.js';
import { createPayment, type PaymentDeps } from '../../payments/create-payment.js';
import { idempotent } from '../idempotent-mutation.js';
import { authedProcedure, router } from '../trpc.js';
import { getPayment, paymentLocation } from './payments.handlers.js';
import {
  createPaymentInput,
  getPaymentInput,
  paymentEnvelope,
  paymentOrProcessing,
} from './payments.schema.js';

const tags = ['payments'];

export const paymentsRouter = router({
  create: authedProcedure
    .meta({
      openapi: {
        method: 'POST',
        path: '/api/v1/payments',
        tags,
        summary: 'Pay an order (201 final; 202 still processing, poll Location)',
      },
      successStatus: 201,
      idempotencyKey: 'required',
    })
    .input(createPaymentInput)
    .output(paymentOrProcessing)
    .use(
      idempotent({
        keyRequired: true,
        mode: 'external',
        nonBusiness: ['traceId'],
        location: paymentLocation,
        ttlHours: (ctx) => ctx.services.config.PAYMENT_IDEMPOTENCY_TTL_HOURS,
      }),
    )
    .mutation(async ({ ctx, input }) => {
      const deps = ctx.services.payments as PaymentDeps;
      return (await createPayment(deps, ctx, ctx.auth, ctx.idempotency!, input)) as never;
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

import { ok } from '../../core/envelope.js';
import { runEffect } from '../../idempotency/effect-run.js';
import { refundEffect, refundKeyTtlHours } from '../../payments/refund-effect.js';
import { refundCreated } from '../../payments/refund-reply.js';
import { idempotentMutation } from '../idempotent-mutation.js';
import { authedProcedure, router } from '../trpc.js';
import { userRowGate } from '../user-gate.js';
import { getRefund, listRefunds } from './refunds.handlers.js';
import {
  createRefundInput,
  getRefundInput,
  listRefundsInput,
  refundEnvelope,
  refundListEnvelope,
} from './refunds.schema.js';

const tags = ['refunds'];

export const refundsRouter = router({
  create: idempotentMutation({
    openapi: {
      method: 'POST',
      path: '/api/v1/payments/{id}/refunds',
      tags,
      summary: 'Refund a payment, in part or whole (201 final; 202 still processing, poll Location)',
    },
    key: 'required',
    mode: 'external',
    checksUserInClaim: true,
    success: refundCreated,
    nonBusiness: ['traceId'],
    ttlHours: refundKeyTtlHours,
    input: createRefundInput,
    output: refundEnvelope,
    execute: ({ ctx, input, request, failureReply }) =>
      runEffect(
        refundEffect,
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
        path: '/api/v1/refunds/{id}',
        tags,
        summary: 'Get a refund (the status query)',
      },
    })
    .input(getRefundInput)
    .output(refundEnvelope)
    .query(async ({ ctx, input }) => ok(await getRefund(ctx.auth, input.id))),

  list: authedProcedure
    .meta({
      openapi: {
        method: 'GET',
        path: '/api/v1/payments/{id}/refunds',
        tags,
        summary: "A payment's refunds, oldest first",
      },
    })
    .input(listRefundsInput)
    .output(refundListEnvelope)
    .query(async ({ ctx, input }) => ok(await listRefunds(ctx.auth, input.id))),
});

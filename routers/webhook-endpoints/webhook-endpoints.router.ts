import { z } from 'zod';
import { ok } from '../../core/envelope.js';
import { newWebhookSecret } from '../../events/webhook-sender.js';
import { getEndpoint, listDeliveries, listEndpoints } from '../../events/webhook-store.js';
import { idempotentMutation } from '../idempotent-mutation.js';
import { adminProcedure, router } from '../trpc.js';
import {
  checkEndpointUrl,
  createEndpoint,
  endpointLocation,
  newEndpointId,
  removeEndpoint,
} from './webhook-endpoints.handlers.js';
import {
  createdEndpointEnvelope,
  createEndpointInput,
  deliveriesInput,
  deliveryListEnvelope,
  endpointEnvelope,
  endpointIdParams,
  endpointListEnvelope,
} from './webhook-endpoints.schema.js';

const tags = ['webhooks'];

export const webhookEndpointsRouter = router({
  create: idempotentMutation({
    openapi: {
      method: 'POST',
      path: '/api/v1/webhook-endpoints',
      tags,
      summary: 'Create a webhook endpoint (its secret is in this answer only)',
    },
    key: 'optional',
    admin: true,
    success: { status: 201, location: endpointLocation },
    input: createEndpointInput,
    output: createdEndpointEnvelope,
    // The secret is made here and shown in the answer of the request that wrote the endpoint only.
    shownOnce: {
      make: () => ({ id: newEndpointId(), secret: newWebhookSecret() }),
      show: (data, secret) => ({ ...data, secret }),
    },
    run: async ({ ctx, input, tx, made }) => {
      if (!made) throw new Error('webhookEndpoints.create runs with what shownOnce made');
      await checkEndpointUrl(ctx, input.url);
      return createEndpoint(ctx, input, made, tx);
    },
  }),

  list: adminProcedure(z.object({}))
    .meta({
      openapi: { method: 'GET', path: '/api/v1/webhook-endpoints', tags, summary: 'List webhook endpoints' },
    })
    .output(endpointListEnvelope)
    .query(async ({ ctx }) => ok(await listEndpoints(ctx.services.sequelize, ctx.auth.tenantId))),

  get: adminProcedure(endpointIdParams)
    .meta({
      openapi: {
        method: 'GET',
        path: '/api/v1/webhook-endpoints/{id}',
        tags,
        summary: 'Get a webhook endpoint',
      },
    })
    .output(endpointEnvelope)
    .query(async ({ ctx, input }) =>
      ok(await getEndpoint(ctx.services.sequelize, ctx.auth.tenantId, input.id)),
    ),

  delete: idempotentMutation({
    openapi: {
      method: 'DELETE',
      path: '/api/v1/webhook-endpoints/{id}',
      tags,
      summary: 'Delete a webhook endpoint (no delivery starts afterwards)',
    },
    key: 'optional',
    admin: true,
    success: { status: 204 },
    input: endpointIdParams,
    run: ({ ctx, input, tx }) => removeEndpoint(ctx, input.id, tx),
  }),

  deliveries: adminProcedure(deliveriesInput)
    .meta({
      openapi: {
        method: 'GET',
        path: '/api/v1/webhook-endpoints/{id}/deliveries',
        tags,
        summary: "An endpoint's deliveries, newest first",
      },
    })
    .output(deliveryListEnvelope)
    .query(async ({ ctx, input }) =>
      ok(await listDeliveries(ctx.services.sequelize, ctx.auth.tenantId, input.id, input.page, input.size)),
    ),
});

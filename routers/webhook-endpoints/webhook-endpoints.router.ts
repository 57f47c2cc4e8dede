import type { Transaction } from 'sequelize';
import { z } from 'zod';
import { type Envelope, ok, type Processing, processingSchema } from '../../core/envelope.js';
import { newWebhookSecret } from '../../events/webhook-sender.js';
import { getEndpoint, listDeliveries, listEndpoints } from '../../events/webhook-store.js';
import { type Answer, deliver } from '../answer.js';
import type { AuthedContext } from '../context.js';
import { idempotentMutation } from '../idempotent-mutation.js';
import { idempotentRequest } from '../idempotent-request.js';
import { admit, type Local } from '../mutation-definition.js';
import { counted, failureAsReply, successOf } from '../mutation-replies.js';
import { adminProcedure, authedProcedure, router } from '../trpc.js';
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

type Created = z.infer<typeof createdEndpointEnvelope>['data'];

/**
 * The create is idempotentMutation's Mode A `local` path written out here, for one difference: the
 * answer the engine stores (and replays) holds `secret: null`, and only the answer of the request
 * that wrote the endpoint gets the secret, added after the engine sealed its record. The definition
 * is the same shape idempotentMutation takes, so the fingerprint, the meta and the replies are
 * built by the same functions.
 */
const createDef: Local<typeof createEndpointInput, Created> = {
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
  // Unused: the procedure below runs `write` itself.
  run: () => Promise.reject(new Error('webhookEndpoints.create runs its own write')),
};

const createOutput: z.ZodType<Envelope<Created> | Processing> = z.union([
  createdEndpointEnvelope,
  processingSchema,
]);

const create = authedProcedure
  .meta({
    openapi: createDef.openapi,
    successStatus: 201,
    createdLocation: true,
    idempotencyKey: 'optional',
  })
  .input(createEndpointInput)
  .output(createOutput)
  .mutation(async ({ ctx: authed, input, path }) => {
    const ctx: AuthedContext = authed;
    const key = admit(ctx, createDef, false);
    await checkEndpointUrl(ctx, input.url);
    const made = { id: newEndpointId(), secret: newWebhookSecret() };
    const execute = async (tx: Transaction) =>
      successOf(createDef, await createEndpoint(ctx, input, made, tx));
    let answer: Answer;
    if (!key) {
      const { reply } = await ctx.services.sequelize.transaction(execute);
      answer = { kind: 'keyless', reply };
    } else {
      const request = idempotentRequest(ctx, createDef, input, path, key, endpointLocation);
      const mine =
        ctx.prefetched?.scopeKey === request.scopeKey ? { record: ctx.prefetched.record } : undefined;
      const outcome = await ctx.services.idempotency.runLocal(
        request,
        (tx) => failureAsReply(execute(tx)),
        ctx.signal,
        mine,
      );
      answer = counted(ctx, path, outcome);
    }
    return deliver(ctx, revealSecret(answer, made));
  });

/** The secret in the answer of the request whose write created this very endpoint, and in no other. */
function revealSecret(answer: Answer, made: { id: string; secret: string }): Answer {
  if (answer.kind !== 'keyless' && answer.kind !== 'executed') return answer;
  const body = answer.reply.body as Envelope<Created> | undefined;
  if (answer.reply.status !== 201 || body?.data?.id !== made.id) return answer;
  return {
    ...answer,
    reply: { ...answer.reply, body: { ...body, data: { ...body.data, secret: made.secret } } },
  };
}

export const webhookEndpointsRouter = router({
  create,

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

import type { Transaction } from 'sequelize';
import { z } from 'zod';
import { type Envelope, type Processing, processingSchema } from '../core/envelope.js';
import type { LocalWork } from '../idempotency/engine.js';
import { type Answer, deliver } from './answer.js';
import type { AuthedContext } from './context.js';
import { idempotentRequest } from './idempotent-request.js';
import { create } from './keyed-create.js';
import {
  admit,
  type Create,
  type External,
  type InputOf,
  isCreate,
  type Local,
  type Made,
  type NoContent,
  type Run,
  type ShownOnce,
} from './mutation-definition.js';
import { counted, failureAsReply, failureReply, successOf } from './mutation-replies.js';
import { authedProcedure } from './trpc.js';

export type { BusinessStatement } from './mutation-definition.js';

/**
 * A mutating operation under the idempotency protocol, as one router entry: it writes its own OpenAPI
 * meta (success status, Location, the Idempotency-Key parameter), adds the 202 PROCESSING answer to
 * the output, validates the key, checks the role, and runs the operation through the engine. The
 * definitions' shapes are in routers/mutation-definition.ts; a create's paths in routers/keyed-create.ts.
 */
export function idempotentMutation<I extends z.ZodType>(def: NoContent<I>): ReturnType<typeof bodiless<I>>;
export function idempotentMutation<I extends z.ZodType, D extends { id: string }>(
  def: Local<I, D> | Create<I, D> | External<I, D>,
): ReturnType<typeof withBody<I, D>>;
export function idempotentMutation<I extends z.ZodType, D extends { id: string }>(
  def: Local<I, D> | Create<I, D> | External<I, D> | NoContent<I>,
) {
  return 'output' in def ? withBody(def) : bodiless(def);
}

function withBody<I extends z.ZodType, D extends { id: string }>(
  def: Local<I, D> | Create<I, D> | External<I, D>,
) {
  // Typed with an unknown input: the output parser is what checks every answer, replays included.
  const output: z.ZodType<Envelope<D> | Processing> = z.union([def.output, processingSchema]);
  return procedure(def, output).mutation(async ({ ctx, input, path }) => {
    if (def.mode === 'external') return deliver(ctx, await external(ctx, def, input, path));
    return deliver(
      ctx,
      isCreate(def) ? await create(ctx, def, input, path) : await local(ctx, def, input, path),
    );
  });
}

function bodiless<I extends z.ZodType>(def: NoContent<I>) {
  const output: z.ZodType<Processing | undefined> = processingSchema.optional();
  return procedure(def, output).mutation(async ({ ctx, input, path }) =>
    deliver(ctx, await local(ctx, def, input, path)),
  );
}

function procedure<I extends z.ZodType, D extends { id: string }, O>(
  def: Local<I, D> | Create<I, D> | External<I, D> | NoContent<I>,
  output: z.ZodType<O>,
) {
  const { status } = def.success;
  const location = 'location' in def.success ? def.success.location : undefined;
  // A create's statements check the user row themselves, so authentication reads nothing first:
  // with a key always (its keyed statement), without one when it has `runAlone`. So does an effect
  // whose claim carries the check (`checksUserInClaim`), with its required key.
  const created = isCreate(def) ? def : undefined;
  const inClaim = 'checksUserInClaim' in def && def.checksUserInClaim === true;
  return authedProcedure
    .meta({
      openapi: def.openapi,
      ...(status === 200 ? {} : { successStatus: status }),
      ...(status === 201 && location ? { createdLocation: true } : {}),
      idempotencyKey: def.key,
      ...(created
        ? {
            userCheckInWrite: {
              role: def.admin ? 'admin' : 'any-role',
              keyless: created.key === 'optional',
              keyed: true,
            } as const,
            allocatesIdFrom: created.allocatesIdFrom,
          }
        : {}),
      ...(inClaim
        ? {
            userCheckInWrite: {
              role: def.admin ? 'admin' : 'any-role',
              keyless: false,
              keyed: true,
            } as const,
          }
        : {}),
    })
    .input(def.input)
    .output(output);
}

async function external<I extends z.ZodType, D>(
  ctx: AuthedContext,
  def: External<I, D>,
  input: InputOf<I>,
  operation: string,
): Promise<Answer> {
  const key = admit(ctx, def, def.checksUserInClaim === true) ?? '';
  const request = idempotentRequest(ctx, def, input, operation, key, def.success.location);
  return counted(ctx, operation, await def.execute({ ctx, input, request, failureReply }));
}

/** `run` in a plain transaction without a key, in the engine's (runLocal) with one. */
async function local<I extends z.ZodType, D extends { id: string } | void>(
  ctx: AuthedContext,
  def: (Local<I, D & { id: string }> | NoContent<I>) & { run: Run<I, D> },
  input: InputOf<I>,
  operation: string,
): Promise<Answer> {
  const key = admit(ctx, def, false);
  const shownOnce = 'shownOnce' in def ? def.shownOnce : undefined;
  const made = shownOnce?.make();
  const execute = async (tx: Transaction) => successOf(def, await def.run({ ctx, input, tx, made }));
  const shown = (answer: Answer) => (shownOnce && made ? showOnce(answer, shownOnce, made) : answer);
  if (!key) {
    // No key: a plain transaction, so the operation is the same with or without one.
    const { reply } = await ctx.services.sequelize.transaction(execute);
    return shown({ kind: 'keyless', reply });
  }
  const location = 'location' in def.success ? def.success.location : undefined;
  const request = idempotentRequest(ctx, def, input, operation, key, location);
  // The key's record when authentication already read it for this very scope (one round trip less).
  const mine = ctx.prefetched?.scopeKey === request.scopeKey ? { record: ctx.prefetched.record } : undefined;
  const work: LocalWork = (tx) => failureAsReply(execute(tx));
  return shown(
    counted(ctx, operation, await ctx.services.idempotency.runLocal(request, work, ctx.signal, mine)),
  );
}

/** The secret in the answer of the request whose write made this very resource, and in no other. */
function showOnce<D extends { id: string }>(answer: Answer, shownOnce: ShownOnce<D>, made: Made): Answer {
  if (answer.kind !== 'keyless' && answer.kind !== 'executed') return answer;
  const body = answer.reply.body as Envelope<D> | undefined;
  if (body?.data?.id !== made.id) return answer;
  const data = shownOnce.show(body.data, made.secret);
  return { ...answer, reply: { ...answer.reply, body: { ...body, data } } };
}

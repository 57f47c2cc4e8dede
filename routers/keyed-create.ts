import type { z } from 'zod';
import type { IdempotentRequest } from '../idempotency/engine.js';
import type { Outcome } from '../idempotency/outcome.js';
import type { UserCheck } from '../models/user.js';
import type { Answer } from './answer.js';
import { admitted, readUser, refusedBecause, userCheck, userRowOf } from './auth/who.js';
import type { AuthedContext } from './context.js';
import { idempotentRequest } from './idempotent-request.js';
import { chooseKeyedPath } from './keyed-path.js';
import { admit, type Create, type InputOf } from './mutation-definition.js';
import { counted, statementWork, successOf } from './mutation-replies.js';

/**
 * A create (users.create, orders.create): without a key its one statement alone (`runAlone`); with
 * one, the path routers/keyed-path.ts chooses, ending on the general path (the engine's runLocal
 * with the statement) for whatever the one statement leaves undecided.
 */
export async function create<I extends z.ZodType, D extends { id: string }>(
  ctx: AuthedContext,
  def: Create<I, D>,
  input: InputOf<I>,
  operation: string,
): Promise<Answer> {
  const key = admit(ctx, def, true);
  if (!key) {
    // A required key was refused (400) by admit; an optional one leaves runAlone.
    if (def.key !== 'optional') throw new Error('a create with a required key reached its keyless path');
    const data = await runAloneChecked(ctx, def.admin === true, def.runAlone, input);
    return { kind: 'keyless', reply: successOf(def, data).reply };
  }
  const request = idempotentRequest(ctx, def, input, operation, key, def.success.location);
  let authed = ctx;
  switch (chooseKeyedPath(ctx, request.scopeKey, def.readFirst?.(input) === true)) {
    case 'one-statement': {
      const done = await atOnce(ctx, def, input, request);
      if (done) return counted(ctx, operation, done);
      authed = await readFirst(ctx, def, request.scopeKey, true);
      break;
    }
    case 'replay-read-first':
      authed = await readFirst(ctx, def, request.scopeKey, false);
      break;
    case 'read-first':
      authed = await readFirst(ctx, def, request.scopeKey, true);
      break;
    case 'general':
      break;
  }
  // The key's record when authentication (or readFirst) read it for this very scope: a replay, a
  // 40901 or a 202 is answered from it before the statement is built (a password is not hashed).
  const mine = authed.prefetched?.scopeKey === request.scopeKey ? authed.prefetched : undefined;
  const { idempotency } = authed.services;
  const answered = mine && (await idempotency.answerFromRecord(request, mine.record, authed.signal));
  if (answered) return counted(authed, operation, answered);
  const statement = await def.statement({ ctx: authed, input, allocated: mine?.allocated });
  const prefetched = mine ? { record: mine.record } : undefined;
  const work = statementWork(def, statement);
  const outcome = await idempotency.runLocal(request, work, authed.signal, prefetched);
  return counted(authed, operation, outcome);
}

/**
 * A keyless one-statement write. When the user row was not read, the statement checks it; if it
 * refused, the row is read for the 403 it means, or, when the row admits the request now (it
 * changed in between), the write runs as after a read.
 */
async function runAloneChecked<In, D>(
  ctx: AuthedContext,
  admin: boolean,
  runAlone: (args: { ctx: AuthedContext; input: In; check?: UserCheck }) => Promise<D | undefined>,
  input: In,
): Promise<D> {
  if (!ctx.userCheckInWrite) return defined(await runAlone({ ctx, input }));
  const written = await runAlone({ ctx, input, check: userCheck(ctx.auth, admin) });
  if (written !== undefined) return written;
  const auth = await refusedBecause(ctx.services.sequelize, ctx.auth, admin);
  return defined(await runAlone({ ctx: { ...ctx, auth, userCheckInWrite: false }, input }));
}

function defined<D>(data: D | undefined): D {
  if (data === undefined) throw new Error('a write without a check answered nothing');
  return data;
}

/**
 * A keyed create in one statement (engine.ts runAtOnce): its id from a block taken ahead
 * (models/id-blocks.ts) and its time, so its answer is known before it is sent. undefined: the
 * general path answers it.
 */
async function atOnce<I extends z.ZodType, D extends { id: string }>(
  ctx: AuthedContext,
  def: Create<I, D>,
  input: InputOf<I>,
  request: IdempotentRequest,
): Promise<Outcome | undefined> {
  const allocated = await ctx.services.ids.take(def.allocatesIdFrom);
  const statement = await def.statement({ ctx, input, allocated });
  const check = userCheck(ctx.auth, def.admin === true);
  const done = await ctx.services.idempotency.runAtOnce(
    request,
    statementWork(def, statement),
    check,
    ctx.signal,
  );
  if (done.kind === 'refused') {
    // The 403 the row means (DISABLED, or not an admin); the statement and this rule are the same.
    admitted(ctx.auth, userRowOf(done.user), def.admin === true);
    return undefined;
  }
  return done.kind === 'answered' ? done.outcome : undefined;
}

/**
 * The user row and the key's record read first, as authentication reads them for any other request;
 * with `allocate`, also the new row's id when the key has no record (its answer is then known
 * before the write).
 */
async function readFirst(
  ctx: AuthedContext,
  def: { admin?: boolean; allocatesIdFrom: string },
  scope: string,
  allocate: boolean,
): Promise<AuthedContext> {
  const sequence = allocate ? def.allocatesIdFrom : undefined;
  const { row, prefetched } = await readUser(ctx.services.sequelize, ctx.auth, scope, sequence);
  const auth = admitted(ctx.auth, row, def.admin === true);
  return { ...ctx, auth, prefetched, userCheckInWrite: false };
}

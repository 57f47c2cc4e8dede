import type { Transaction } from 'sequelize';
import type { OpenApiMeta } from 'trpc-to-openapi';
import { z } from 'zod';
import type { Config } from '../core/config.js';
import { type Envelope, ok, type Processing, processingSchema } from '../core/envelope.js';
import type { Allocated } from '../core/sql.js';
import type { IdempotentRequest, LocalResult, LocalStatement, LocalWork } from '../idempotency/engine.js';
import { readIdempotencyKey } from '../idempotency/key.js';
import type { Outcome, Reply } from '../idempotency/outcome.js';
import type { UserCheck } from '../models/user.js';
import { type Answer, deliver } from './answer.js';
import { admittedAs, readUser, refusedBecause, requireAdminRole, userCheck, userRowOf } from './auth/who.js';
import type { AuthedContext } from './context.js';
import { errorAnswer } from './error-answer.js';
import { idempotentRequest } from './idempotent-request.js';
import { authedProcedure, requireAdmin } from './trpc.js';

/**
 * The input a resolver of `.input(I)` receives, read off tRPC's own builder type, so that it reaches
 * `run` unchanged (tRPC keeps the type deferred inside a generic builder, where `z.output<I>` is not
 * the same type).
 */
type InputOf<I extends z.ZodType> = Parameters<
  Parameters<ReturnType<typeof authedProcedure.input<I>>['mutation']>[0]
>[0]['input'];

interface Definition<I extends z.ZodType> {
  openapi: NonNullable<OpenApiMeta['openapi']>;
  /** Idempotency-Key required (orders, payments: 400 without) or optional (users). */
  key: 'required' | 'optional';
  /** Admin only: checked after the input and the key are validated (400 before 403, CONTRACT section 3). */
  admin?: boolean;
  /** Body fields without business meaning, left out of the fingerprint. */
  nonBusiness?: readonly string[];
  /** How long this operation's records are kept (default IDEMPOTENCY_TTL_HOURS). */
  ttlHours?: (config: Config) => number;
  input: I;
}

/**
 * The success answer, declared once: the OpenAPI document, the stored reply and the REST status all
 * read it. A location makes it a create: Location header, and the record keeps the resource id.
 */
interface Success {
  status: 200 | 201;
  location?: (resourceId: string) => string;
}

type Run<I extends z.ZodType, D> = (args: {
  ctx: AuthedContext;
  input: InputOf<I>;
  tx: Transaction;
}) => Promise<D>;

/** Mode A: `run` executes inside the engine's transaction (inside a plain one without a key). */
interface Local<I extends z.ZodType, D extends { id: string }> extends Definition<I> {
  mode?: 'local';
  success: Success;
  output: z.ZodType<Envelope<D>>;
  run: Run<I, D>;
  /**
   * The same operation when it is one statement, run without a key outside any transaction (one
   * statement is atomic by itself). With `check`, the statement writes only where the user row
   * admits the request, and the answer is undefined when it did not: the row's rule checked by the
   * write itself (routers/auth/who.ts `userCheck`), one round trip in all instead of 2.
   */
  runAlone?: (args: { ctx: AuthedContext; input: InputOf<I>; check?: UserCheck }) => Promise<D | undefined>;
  /**
   * The same operation as one statement, for a request with a key: sent in the claim's round trip
   * (idempotency/engine.ts LocalStatement), 3 round trips instead of 4. `run` stays for the rest.
   */
  statement?: (args: {
    ctx: AuthedContext;
    input: InputOf<I>;
    allocated?: Allocated;
  }) => Promise<BusinessStatement<D>>;
  /**
   * The sequence of the created row's id, when `statement` knows its answer once the id and time
   * are given (`allocated`): the auth read takes both (routers/auth/who.ts readUser), and the
   * record's final state then rides with the claim and the write, 2 round trips instead of 3.
   */
  allocatesIdFrom?: string;
}

/** A business write as one statement (literal values), and how to read what it did. */
export interface BusinessStatement<D> {
  /** The write, writing only where `guard` (an SQL condition) holds. */
  sql(guard: string): string;
  /** The answer's data from the rows it returned. */
  result(rows: unknown[]): D;
  /** The error a failure of it means (a domain error such as a 409), or the error itself. */
  error(err: unknown): unknown;
  /** The answer's data, when known before the write (given an allocated id and time). */
  answer?: D;
}

/** Mode A without a body: 204. */
interface NoContent<I extends z.ZodType> extends Definition<I> {
  mode?: 'local';
  success: { status: 204 };
  run: Run<I, void>;
}

/** Mode B: `execute` gets the prepared request and runs the lease protocol itself (payments). */
interface External<I extends z.ZodType, D> extends Definition<I> {
  mode: 'external';
  key: 'required';
  success: Success;
  output: z.ZodType<Envelope<D>>;
  execute(args: {
    ctx: AuthedContext;
    input: InputOf<I>;
    request: IdempotentRequest;
    /** The reply a failure the request caused is stored as. */
    failureReply: (error: unknown) => Reply;
  }): Promise<Outcome>;
}

/**
 * A mutating operation under the idempotency protocol, as one router entry: it writes its own OpenAPI
 * meta (success status, Location, the Idempotency-Key parameter), adds the 202 PROCESSING answer to
 * the output, validates the key, checks the role, and runs the operation through the engine.
 */
export function idempotentMutation<I extends z.ZodType>(def: NoContent<I>): ReturnType<typeof bodiless<I>>;
export function idempotentMutation<I extends z.ZodType, D extends { id: string }>(
  def: Local<I, D> | External<I, D>,
): ReturnType<typeof withBody<I, D>>;
export function idempotentMutation<I extends z.ZodType, D extends { id: string }>(
  def: Local<I, D> | External<I, D> | NoContent<I>,
) {
  return 'output' in def ? withBody(def) : bodiless(def);
}

function withBody<I extends z.ZodType, D extends { id: string }>(def: Local<I, D> | External<I, D>) {
  // Typed with an unknown input: the output parser is what checks every answer, replays included.
  const output: z.ZodType<Envelope<D> | Processing> = z.union([def.output, processingSchema]);
  return procedure(def, output).mutation(async ({ ctx, input, path }) =>
    deliver(
      ctx,
      def.mode === 'external' ? await external(ctx, def, input, path) : await local(ctx, def, input, path),
    ),
  );
}

function bodiless<I extends z.ZodType>(def: NoContent<I>) {
  const output: z.ZodType<Processing | undefined> = processingSchema.optional();
  return procedure(def, output).mutation(async ({ ctx, input, path }) =>
    deliver(ctx, await local(ctx, def, input, path)),
  );
}

function procedure<I extends z.ZodType, O>(
  def: Definition<I> & { success: { status: 200 | 201 | 204; location?: unknown }; allocatesIdFrom?: string },
  output: z.ZodType<O>,
) {
  const { status, location } = def.success;
  const keyless = checksUserKeyless(def);
  const keyed = checksUserKeyed(def);
  return authedProcedure
    .meta({
      openapi: def.openapi,
      ...(status === 200 ? {} : { successStatus: status }),
      ...(status === 201 && location ? { createdLocation: true } : {}),
      idempotencyKey: def.key,
      ...(keyless || keyed
        ? { userCheckInWrite: { role: def.admin ? 'admin' : 'any-role', keyless, keyed } as const }
        : {}),
      ...(def.allocatesIdFrom ? { allocatesIdFrom: def.allocatesIdFrom } : {}),
    })
    .input(def.input)
    .output(output);
}

/** Without a key, the write is one statement that can check the user row itself (`runAlone`). */
function checksUserKeyless(def: object): boolean {
  return 'runAlone' in def && def.runAlone !== undefined;
}

/** With a key, the create is sent as one statement that checks the user row (engine.ts runAtOnce). */
function checksUserKeyed(def: object): boolean {
  return (
    'allocatesIdFrom' in def && def.allocatesIdFrom !== undefined && 'statement' in def && !!def.statement
  );
}

/**
 * The key (400) and the role (403), in the order CONTRACT section 3 gives their answers. Without the
 * user row read (`userCheckInWrite`), the role is checked by the write instead (`runAlone`'s check,
 * or the keyed create's statement).
 */
function admit(ctx: AuthedContext, def: Definition<z.ZodType>): string | undefined {
  const key = readIdempotencyKey(ctx.headers['idempotency-key'], def.key === 'required');
  if (ctx.userCheckInWrite && !(key === undefined ? checksUserKeyless(def) : checksUserKeyed(def))) {
    // Only a write that carries the check may run without the row read; anything else must not.
    throw new Error('the user row was not read, and this write cannot check it');
  }
  if (def.admin && !ctx.userCheckInWrite) requireAdmin(ctx);
  return key;
}

/**
 * A keyless one-statement write. When the user row was not read, the statement checks it; if it
 * refused, the row is read for the 403 it means, or, when the row admits the request now (it
 * changed in between), the write runs as after a read.
 */
async function runAloneChecked<In, D>(
  ctx: AuthedContext,
  def: { admin?: boolean },
  runAlone: (args: { ctx: AuthedContext; input: In; check?: UserCheck }) => Promise<D | undefined>,
  input: In,
): Promise<D> {
  if (!ctx.userCheckInWrite) return defined(await runAlone({ ctx, input }));
  const admin = def.admin === true;
  const written = await runAlone({ ctx, input, check: userCheck(ctx.auth, admin) });
  if (written !== undefined) return written;
  const auth = await refusedBecause(ctx.services.sequelize, ctx.auth, admin);
  return defined(await runAlone({ ctx: { ...ctx, auth, userCheckInWrite: false }, input }));
}

function defined<D>(data: D | undefined): D {
  if (data === undefined) throw new Error('a write without a check answered nothing');
  return data;
}

async function external<I extends z.ZodType, D>(
  ctx: AuthedContext,
  def: External<I, D>,
  input: InputOf<I>,
  operation: string,
): Promise<Answer> {
  const key = admit(ctx, def) ?? '';
  const request = idempotentRequest(ctx, def, input, operation, key, def.success.location);
  return counted(ctx, operation, await def.execute({ ctx, input, request, failureReply }));
}

async function local<I extends z.ZodType, D extends { id: string } | void>(
  ctx: AuthedContext,
  def: (Local<I, D & { id: string }> | NoContent<I>) & { run: Run<I, D> },
  input: InputOf<I>,
  operation: string,
): Promise<Answer> {
  const key = admit(ctx, def);
  const execute = async (tx: Transaction) => successOf(def, await def.run({ ctx, input, tx }));
  if (!key) {
    if ('runAlone' in def && def.runAlone) {
      const data = await runAloneChecked(ctx, def, def.runAlone, input);
      return { kind: 'keyless', reply: successOf(def, data).reply };
    }
    // No key: a plain transaction, so the operation is the same with or without one.
    const { reply } = await ctx.services.sequelize.transaction(execute);
    return { kind: 'keyless', reply };
  }
  const location = 'location' in def.success ? def.success.location : undefined;
  const request = idempotentRequest(ctx, def, input, operation, key, location);
  let authed = ctx;
  if (ctx.userCheckInWrite) {
    // A keyed create sent as one statement, which checks the user row itself (authentication read
    // nothing); when it leaves the request to the general path, the row is read now, as
    // authentication would have, with the key's record.
    const done = 'statement' in def ? await atOnce(ctx, def, input, request) : undefined;
    if (done) return counted(ctx, operation, done);
    authed = await readFirst(ctx, def, request.scopeKey);
  }
  // The key's record when authentication already read it for this very scope (one round trip less).
  const mine = authed.prefetched?.scopeKey === request.scopeKey ? authed.prefetched : undefined;
  const prefetched = mine ? { record: mine.record } : undefined;
  const statement =
    'statement' in def && def.statement
      ? await def.statement({ ctx: authed, input, allocated: mine?.allocated })
      : undefined;
  const work: LocalWork = statement ? statementWork(def, statement) : (tx) => failureAsReply(execute(tx));
  const outcome = await authed.services.idempotency.runLocal(request, work, authed.signal, prefetched);
  return counted(authed, operation, outcome);
}

/** A business statement as the engine's Mode A work (its answer, when known before the write). */
function statementWork<D extends { id: string }>(
  def: { success: Success | { status: 204 }; output?: unknown },
  statement: BusinessStatement<D>,
): LocalStatement {
  const known = statement.answer;
  return {
    sql: statement.sql,
    settle: (rows) => ({ ok: true, ...successOf(def, statement.result(rows)) }),
    fail: (err) => failureAsResult(statement.error(err)),
    ...(known === undefined ? {} : { answer: { ok: true, ...successOf(def, known) } }),
  };
}

/**
 * A keyed create in one statement (engine.ts runAtOnce): its id from a block taken ahead
 * (models/id-blocks.ts) and its time, so its answer is known before it is sent. undefined: the
 * general path answers it.
 */
async function atOnce<I extends z.ZodType, D extends { id: string }>(
  ctx: AuthedContext,
  def: Local<I, D>,
  input: InputOf<I>,
  request: IdempotentRequest,
): Promise<Outcome | undefined> {
  const sequence = def.allocatesIdFrom;
  const { ids, idempotency } = ctx.services;
  if (!sequence || !def.statement || !idempotency.atOnceAvailable(request.scopeKey)) return undefined;
  const allocated = await ids.take(sequence);
  const statement = await def.statement({ ctx, input, allocated });
  const check = userCheck(ctx.auth, def.admin === true);
  const done = await idempotency.runAtOnce(request, statementWork(def, statement), check, ctx.signal);
  if (done.kind === 'refused') {
    // The 403 the row means (DISABLED, or not an admin); the statement and this rule are the same.
    const auth = admittedAs(ctx.auth, userRowOf(done.user));
    if (def.admin) requireAdminRole(auth);
    return undefined;
  }
  return done.kind === 'answered' ? done.outcome : undefined;
}

/** The user row and the key's record read first, as authentication reads them for any other request. */
async function readFirst(
  ctx: AuthedContext,
  def: { admin?: boolean; allocatesIdFrom?: string },
  scope: string,
): Promise<AuthedContext> {
  const { row, prefetched } = await readUser(ctx.services.sequelize, ctx.auth, scope, def.allocatesIdFrom);
  const auth = admittedAs(ctx.auth, row);
  if (def.admin) requireAdminRole(auth);
  return { ...ctx, auth, prefetched, userCheckInWrite: false };
}

/** The reply of a success, and the resource id a create stores with its record. */
function successOf(
  def: { success: Success | { status: 204 }; output?: unknown },
  data: { id: string } | void,
): { reply: Reply; resourceId: string | null } {
  const location = 'location' in def.success ? def.success.location : undefined;
  const resourceId = location && data ? data.id : null;
  const headers: Record<string, string> = location && resourceId ? { Location: location(resourceId) } : {};
  const body = 'output' in def ? ok(data) : undefined;
  return { reply: { status: def.success.status, headers, body }, resourceId };
}

/**
 * A failure the request caused (4xx: a retry would fail the same way) becomes the reply the engine
 * stores and replays. Anything else (5xx, 429, unknown) is thrown on: the engine rolls back, and a
 * retry with the same key executes.
 */
async function failureAsReply(
  work: Promise<{ reply: Reply; resourceId: string | null }>,
): Promise<LocalResult> {
  try {
    return { ok: true, ...(await work) };
  } catch (err) {
    return failureAsResult(err);
  }
}

/** A failure the request caused, as the result the engine stores; any other is thrown on. */
function failureAsResult(err: unknown): LocalResult {
  const reply = failureReply(err);
  if (reply.status < 400 || reply.status >= 500 || reply.status === 408 || reply.status === 429) throw err;
  return { ok: false, error: err, reply };
}

/** A failure as it is stored: its status and error envelope (no header of it is replayed). */
function failureReply(err: unknown): Reply {
  const { status, body } = errorAnswer(err);
  return { status, headers: {}, body };
}

function counted(ctx: AuthedContext, operation: string, outcome: Outcome): Outcome {
  ctx.services.countOutcome(operation, outcome.kind);
  return outcome;
}

import type { Transaction } from 'sequelize';
import type { OpenApiMeta } from 'trpc-to-openapi';
import type { z } from 'zod';
import type { Config } from '../core/config.js';
import type { Envelope } from '../core/envelope.js';
import type { Allocated } from '../core/sql.js';
import type { IdempotentRequest } from '../idempotency/engine.js';
import { readIdempotencyKey } from '../idempotency/key.js';
import type { Outcome, Reply } from '../idempotency/outcome.js';
import type { UserCheck } from '../models/user.js';
import type { AuthedContext } from './context.js';
import { type authedProcedure, requireAdmin } from './trpc.js';

/**
 * The input a resolver of `.input(I)` receives, read off tRPC's own builder type, so that it reaches
 * the operation unchanged (tRPC keeps the type deferred inside a generic builder, where
 * `z.output<I>` is not the same type).
 */
export type InputOf<I extends z.ZodType> = Parameters<
  Parameters<ReturnType<typeof authedProcedure.input<I>>['mutation']>[0]
>[0]['input'];

export interface Definition<I extends z.ZodType> {
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
export interface Success {
  /** 202: the operation's own answer is "accepted" (an export: long-running work with a task id). */
  status: 200 | 201 | 202;
  location?: (resourceId: string) => string;
}

/** What ShownOnce made before the write: the new resource's id and the value only its answer shows. */
export interface Made {
  id: string;
  secret: string;
}

export type Run<I extends z.ZodType, D> = (args: {
  ctx: AuthedContext;
  input: InputOf<I>;
  tx: Transaction;
  /** With `shownOnce`: what it made for this request. */
  made?: Made;
}) => Promise<D>;

/**
 * A value that only the answer of the request whose write made it may carry (a webhook endpoint's
 * secret: CONTRACT sections 5 and 12). It is made before the write, which stores it only sealed, and
 * put into that one answer after the engine stored its record: the stored answer and every replay
 * hold what `run` returned (`secret: null`).
 */
export interface ShownOnce<D extends { id: string }> {
  make(): Made;
  show(data: D, secret: string): D;
}

/** Mode A: `run` executes inside the engine's transaction (inside a plain one without a key). */
export interface Local<I extends z.ZodType, D extends { id: string }> extends Definition<I> {
  mode?: 'local';
  success: Success;
  output: z.ZodType<Envelope<D>>;
  run: Run<I, D>;
  shownOnce?: ShownOnce<D>;
}

/**
 * Mode A for a create that is one statement: with a key, `statement` (its path chosen by
 * routers/keyed-path.ts); without one, `runAlone`. Nothing else runs it, so it has no `run`.
 */
export type Create<I extends z.ZodType, D extends { id: string }> = Definition<I> & {
  mode?: 'local';
  success: Success & { status: 201 };
  output: z.ZodType<Envelope<D>>;
  /**
   * The create as one statement for a request with a key, its answer known before the write
   * (`allocated`: the new row's id and time). Sent with the claim and the record's final state.
   */
  statement: (args: {
    ctx: AuthedContext;
    input: InputOf<I>;
    allocated?: Allocated;
  }) => Promise<BusinessStatement<D>>;
  /**
   * The sequence of the created row's id: a block of them is taken ahead (models/id-blocks.ts), or
   * the auth read takes one (routers/auth/who.ts readUser), so the answer is sealed before the write.
   */
  allocatesIdFrom: string;
  /**
   * True when building `statement` for this input has a slow step (a password's scrypt hash): the
   * key's record and the user row are then read first, so that a replay, a 40901 or a 403 is
   * answered without it (routers/keyed-path.ts).
   */
  readFirst?: (input: InputOf<I>) => boolean;
} & (
    | { key: 'required' }
    | {
        key: 'optional';
        /**
         * The create without a key, one statement outside any transaction (atomic by itself). With
         * `check`, it writes only where the user row admits the request, and answers undefined when
         * it did not: the row's rule checked by the write itself (routers/auth/who.ts `userCheck`).
         */
        runAlone: (args: {
          ctx: AuthedContext;
          input: InputOf<I>;
          check?: UserCheck;
        }) => Promise<D | undefined>;
      }
  );

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
export interface NoContent<I extends z.ZodType> extends Definition<I> {
  mode?: 'local';
  success: { status: 204 };
  run: Run<I, void>;
}

/** Mode B: `execute` gets the prepared request and runs the lease protocol itself (payments). */
export interface External<I extends z.ZodType, D> extends Definition<I> {
  mode: 'external';
  key: 'required';
  success: Success;
  output: z.ZodType<Envelope<D>>;
  /**
   * `execute` checks the user row in its effect's claim: it must hand runEffect
   * `userRowGate(ctx, admin)` (routers/user-gate.ts). Authentication then reads nothing first, one
   * round trip fewer; a definition with this flag whose execute does not pass the gate reads no user
   * row at all (test/payments/user-row-in-claim.test.ts holds payments and refunds to it).
   */
  checksUserInClaim?: true;
  execute(args: {
    ctx: AuthedContext;
    input: InputOf<I>;
    request: IdempotentRequest;
    /** The reply a failure the request caused is stored as. */
    failureReply: (error: unknown) => Reply;
  }): Promise<Outcome>;
}

/** A create sends its write as one statement that can check the user row itself. */
export function isCreate<I extends z.ZodType, D extends { id: string }>(
  def: Local<I, D> | Create<I, D> | External<I, D> | NoContent<I>,
): def is Create<I, D> {
  return 'statement' in def;
}

/**
 * The key (400) and the role (403), in the order CONTRACT section 3 gives their answers. Without the
 * user row read (`userCheckInWrite`), the role is checked by the write instead (`checksRow`: a
 * create's `runAlone` check or its keyed statement, an effect's claim).
 */
export function admit(
  ctx: AuthedContext,
  def: Definition<z.ZodType>,
  checksRow: boolean,
): string | undefined {
  const key = readIdempotencyKey(ctx.headers['idempotency-key'], def.key === 'required');
  if (ctx.userCheckInWrite && !checksRow) {
    // Only a write that carries the check may run without the row read; anything else must not.
    throw new Error('the user row was not read, and this write cannot check it');
  }
  if (def.admin && !ctx.userCheckInWrite) requireAdmin(ctx);
  return key;
}

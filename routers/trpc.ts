import { initTRPC } from '@trpc/server';
import { TRPC_ERROR_CODES_BY_KEY } from '@trpc/server/rpc';
import type { z } from 'zod';
import { DomainError } from '../core/errors.js';
import { IDEMPOTENCY_KEY_PATTERN, scopeKey } from '../idempotency/key.js';
import { type Identity, verifyBearer } from './auth/jwt.js';
import { admittedAs, readUser, requireAdminRole } from './auth/who.js';
import type { AuthedContext, Context } from './context.js';
import { errorAnswer, toTrpcError } from './error-answer.js';
import { ERROR_TABLE } from './error-table.js';
import type { Meta } from './meta.js';

/** The one initTRPC of the service. Everything below builds on the procedures it exports. */
const t = initTRPC
  .context<Context>()
  .meta<Meta>()
  .create({
    // Subscriptions over SSE (events.onEvent): a ping keeps idle streams open through proxies, and a
    // client that heard nothing (not even a ping) for a while reconnects with its last event id.
    sse: { ping: { enabled: true, intervalMs: 10000 }, client: { reconnectAfterInactivityMs: 30000 } },
    // The tRPC transport's error body comes from the same answer as the REST envelope.
    errorFormatter({ shape, error }) {
      const answer = errorAnswer(error);
      const code = ERROR_TABLE[answer.kind].trpc;
      return {
        message: answer.body.message,
        code: TRPC_ERROR_CODES_BY_KEY[code],
        data: {
          code,
          httpStatus: answer.status,
          businessCode: answer.body.code,
          path: shape.data.path,
          ...(answer.body.data ? { mismatch: answer.body.data.mismatch } : {}),
        },
      };
    },
  });

export const router = t.router;
export const createCallerFactory = t.createCallerFactory;

/**
 * A domain error thrown by a handler reaches tRPC as an INTERNAL_SERVER_ERROR around it; thrown again
 * here with its own code from the table, so createCaller users see the same code as both transports.
 */
const domainErrorsKeepTheirCode = t.middleware(async ({ next }) => {
  const result = await next();
  if (
    !result.ok &&
    result.error.code === 'INTERNAL_SERVER_ERROR' &&
    result.error.cause instanceof DomainError
  ) {
    throw toTrpcError(result.error.cause);
  }
  return result;
});

/**
 * tRPC hands a procedure no input when the call sends none (a query without `?input`, a mutation
 * without a body). Every procedure here takes one object, so no input is the empty object: a list
 * gets its defaults and a create a 400 naming its first missing field, as REST answers the same call
 * (before, "expected object, received undefined", naming no field).
 */
const absentInputIsEmpty = t.middleware(({ getRawInput, next }) =>
  next({ getRawInput: async () => (await getRawInput()) ?? {} }),
);

export const publicProcedure = t.procedure.use(absentInputIsEmpty).use(domainErrorsKeepTheirCode);

/**
 * Verifies the bearer token, then the user row when one exists: a DISABLED user is refused (403)
 * and the row's role wins over the token's, so a demotion takes effect before the token expires.
 *
 * A mutation whose write can check the row itself (meta `userCheckInWrite`: a keyless create that is
 * one statement, or a keyed create sent as one) reads nothing first: its statement carries the same
 * rule (routers/auth/who.ts `userCheck`), so it takes one round trip instead of two. A 400, decided
 * before the write, is then held to the rule here afterwards: a DISABLED user's 403 comes first, as
 * CONTRACT section 3 ranks it with 401.
 */
export const authedProcedure = publicProcedure.use(async ({ ctx, next, path, type, meta }) => {
  const identity: Identity = verifyBearer(ctx.services.config.JWT_SECRET, ctx.headers.authorization);
  const key = ctx.headers['idempotency-key'];
  const wellFormedKey = typeof key === 'string' && IDEMPOTENCY_KEY_PATTERN.test(key);
  // Only when the token's role would do (a user token for an admin-only write is read first, so that
  // it is refused before the write's own work, such as hashing a password).
  const check = type === 'mutation' ? meta?.userCheckInWrite : undefined;
  const rideAlong =
    check !== undefined &&
    (check.role === 'any-role' || identity.role === 'admin') &&
    (key === undefined ? check.keyless : wellFormedKey && check.keyed);
  if (rideAlong) {
    const result = await next({ ctx: { auth: identity, userCheckInWrite: true } });
    // A 400 is decided before the write, which checks the row: the row is read for it, so that a
    // DISABLED user's 403 wins. Any other answer came from the write's own check or after it.
    if (result.ok || errorAnswer(result.error).status !== 400) return result;
    const { row } = await readUser(ctx.services.sequelize, identity);
    admittedAs(identity, row);
    return result;
  }
  // A mutation with a well-formed key: its record is read with the user row, one round trip (the
  // key's own checks, and a 400 for a malformed one, come later in the idempotent mutation); a
  // create that declares its id sequence also gets its new id and time there when the key is new.
  const scope =
    type === 'mutation' && wellFormedKey
      ? scopeKey(identity.tenantId, identity.userId, path, key)
      : undefined;
  // On every authenticated request: a plain indexed read, no model instance built.
  const { row, prefetched } = await readUser(ctx.services.sequelize, identity, scope, meta?.allocatesIdFrom);
  return next({ ctx: { auth: admittedAs(identity, row), prefetched } });
});

/** Refuses any role but admin (403). */
export function requireAdmin(ctx: AuthedContext): void {
  requireAdminRole(ctx.auth);
}

/**
 * An admin-only procedure with its input: the role check runs after the input's validation, because
 * CONTRACT section 3 answers a 400 before a 403 (tRPC runs `.input()` and `.use()` in the order they
 * are chained, so a role check chained before `.input()` would answer 403 first).
 */
export function adminProcedure<T extends z.ZodType>(input: T) {
  return authedProcedure.input(input).use(({ ctx, next }) => {
    requireAdmin(ctx);
    return next();
  });
}

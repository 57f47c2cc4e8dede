import { initTRPC, TRPCError } from '@trpc/server';
import { TRPC_ERROR_CODES_BY_KEY } from '@trpc/server/rpc';
import { QueryTypes } from 'sequelize';
import type { OpenApiMeta } from 'trpc-to-openapi';
import { AppError, Forbidden, toErrorResponse, toTrpcError, trpcCodeFor } from '../core/errors.js';
import type { User } from '../models/user.js';
import { type Identity, verifyBearer } from './auth/jwt.js';
import type { Context } from './context.js';

export type ProcedureMeta = {
  /** REST success status when it is not 200 (201 create, 204 delete). */
  successStatus?: number;
  /** Documents the Idempotency-Key header (the middleware enforces it). */
  idempotencyKey?: 'required' | 'optional';
  [key: string]: unknown;
};

const t = initTRPC
  .context<Context>()
  .meta<OpenApiMeta<ProcedureMeta>>()
  .create({
    // The tRPC transport's error body comes from the same mapping as the REST envelope.
    errorFormatter({ shape, error }) {
      const mapped = toErrorResponse(error);
      const code = trpcCodeFor(mapped.status);
      return {
        message: mapped.body.message,
        code: TRPC_ERROR_CODES_BY_KEY[code],
        data: { code, httpStatus: mapped.status, businessCode: mapped.body.code, path: shape.data.path },
      };
    },
  });

export const router = t.router;
export const createCallerFactory = t.createCallerFactory;
export const middleware = t.middleware;

/** Domain errors thrown below the routers get their proper tRPC code (and so their HTTP status). */
const mapDomainErrors = t.middleware(async ({ next }) => {
  const result = await next();
  if (!result.ok && !(result.error.cause instanceof TRPCError) && result.error.cause instanceof AppError) {
    const mapped = toTrpcError(result.error.cause);
    return { ...result, error: mapped };
  }
  return result;
});

export const publicProcedure = t.procedure.use(mapDomainErrors);

/**
 * Verifies the bearer token, then the user row when one exists: a DISABLED user is refused (403)
 * and the row's role wins over the token's, so a demotion takes effect before the token expires.
 */
export const authedProcedure = publicProcedure.use(async ({ ctx, next }) => {
  const header = ctx.headers.authorization;
  const identity: Identity = verifyBearer(ctx.services.config.JWT_SECRET, header);
  // On every authenticated request: a plain indexed read, no model instance built.
  const [row] = await ctx.services.sequelize.query<{ status: User['status']; role: User['role'] }>(
    'SELECT status, role FROM users WHERE id = $1 AND tenant_id = $2',
    { bind: [identity.userId, identity.tenantId], type: QueryTypes.SELECT },
  );
  if (row?.status === 'DISABLED') throw new Forbidden('User is disabled');
  const auth: Identity = row ? { ...identity, role: row.role } : identity;
  return next({ ctx: { auth } });
});

/**
 * Role check as a middleware placed after `.input()`: validation (400) answers before authorisation
 * (403), the precedence CONTRACT section 3 fixes. Idempotent operations use `idempotent({adminOnly})`
 * instead, which checks after the Idempotency-Key's own validation.
 */
export const requireAdmin = t.middleware(({ ctx, next }) => {
  if ((ctx as AuthedContext).auth?.role !== 'admin') throw new Forbidden('Admin role required');
  return next();
});

export type AuthedContext = Context & { auth: Identity };

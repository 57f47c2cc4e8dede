import type { Transaction } from 'sequelize';
import { Forbidden } from '../core/errors.js';
import type { ExecResult, IdempotencyEngine, IdempotentRequest } from '../idempotency/engine.js';
import { fingerprint } from '../idempotency/fingerprint.js';
import { readIdempotencyKey, scopeKey, userScope } from '../idempotency/key.js';
import type { Identity } from './auth/jwt.js';
import type { Context } from './context.js';
import { middleware } from './trpc.js';

export interface IdempotentOptions {
  /** Idempotency-Key required (orders, payments) or optional (users). */
  keyRequired: boolean;
  /** Checked after key validation, so a bad key is a 400 before a 403 (CONTRACT section 3 order). */
  adminOnly?: boolean;
  /** Body fields without business meaning, left out of the fingerprint. */
  nonBusiness?: readonly string[];
  /** 'local' (Mode A, default): the engine runs the procedure in its transaction. 'external'
   *  (Mode B): the procedure gets the prepared request and runs the lease protocol itself. */
  mode?: 'local' | 'external';
  ttlHours?: (ctx: Context) => number;
  location?: (resourceId: string) => string;
}

interface OpenApiMetaLike {
  openapi?: { method: string; path: string };
}

/** Canonical REST path with the input's path parameters filled in (the fingerprint's path). */
function canonicalPath(template: string, input: Record<string, unknown>): string {
  return template.replace(/\{(.+?)\}/g, (_, key: string) => encodeURIComponent(String(input[key] ?? '')));
}

/**
 * The idempotency protocol as one procedure middleware, placed after `.input()` so that it sees
 * the zod-parsed input (defaults applied). Both transports run it, so a retry may switch between
 * REST and tRPC with the same key.
 */
export function idempotent(opts: IdempotentOptions) {
  return middleware(async ({ ctx, input, meta, path, next }) => {
    const auth = (ctx as Context & { auth: Identity }).auth;
    const key = readIdempotencyKey(ctx.headers['idempotency-key'], opts.keyRequired);
    if (opts.adminOnly && auth.role !== 'admin') throw new Forbidden('Admin role required');
    const engine = ctx.services.idempotency as IdempotencyEngine;

    if (!key) {
      // No key: a plain transaction, so the procedure body is the same with or without one.
      let result: ExecResult | undefined;
      await ctx.services.sequelize
        .transaction(async (tx) => {
          result = (await next({ ctx: { tx, idempotency: undefined } })) as ExecResult;
          if (!result.ok) throw result.error;
        })
        .catch((err) => {
          if (!result || result.ok) throw err;
        });
      return result as never;
    }

    const openapi = (meta as OpenApiMetaLike | undefined)?.openapi;
    const body = (input ?? {}) as Record<string, unknown>;
    const restPath = canonicalPath(openapi?.path ?? `/${path}`, body);
    const request: IdempotentRequest = {
      scopeKey: scopeKey(auth.tenantId, auth.userId, path, key),
      userScope: userScope(auth.tenantId, auth.userId),
      operation: path,
      ttlHours: opts.ttlHours?.(ctx) ?? ctx.services.config.IDEMPOTENCY_TTL_HOURS,
      location: opts.location,
      requestHash: fingerprint(ctx.services.config.IDEMPOTENCY_HMAC_KEY, {
        method: openapi?.method ?? 'POST',
        path: restPath,
        mediaType: ctx.headers['content-type'],
        apiVersion: /^\/api\/(v\d+)\//.exec(restPath)?.[1] ?? 'v1',
        tenantId: auth.tenantId,
        userId: auth.userId,
        body,
        nonBusiness: opts.nonBusiness,
      }),
    };

    try {
      if (opts.mode === 'external') {
        return await next({ ctx: { tx: undefined as Transaction | undefined, idempotency: request } });
      }
      const result = await engine.runLocal(
        ctx,
        request,
        (tx) => next({ ctx: { tx, idempotency: request } }) as Promise<ExecResult>,
      );
      // A stored or 202 answer short-circuits the procedure; tRPC checks only `ok` and `data`.
      return result as never;
    } finally {
      ctx.response.idempotency = request.outcome;
    }
  });
}

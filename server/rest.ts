import express, { type NextFunction, type Request, type Response } from 'express';
import { createOpenApiNodeHttpHandler } from 'trpc-to-openapi';
import {
  type AppError,
  type ErrorResponse,
  MethodNotAllowed,
  toErrorResponse,
  UnsupportedMediaType,
  ValidationError,
} from '../core/errors.js';
import { type Context, createContextValue, type Services } from '../routers/context.js';
import type { AppRouter } from '../routers/index.js';
import { sendError } from './http-errors.js';
import { buildRouteTable, canonicalPath, matchRoute } from './rest-routes.js';

const ERROR_KEY = Symbol('restError');
type RestRequest = Request & { [ERROR_KEY]?: ErrorResponse };

const BODY_METHODS = new Set(['POST', 'PUT', 'PATCH']);

/** `application/json`, optionally with `charset=utf-8`; anything else is 415. */
export function isJson(contentType: string | undefined): boolean {
  if (!contentType) return false;
  const [type, ...params] = contentType.split(';').map((p) => p.trim().toLowerCase());
  if (type !== 'application/json') return false;
  return params.every((p) => !p.startsWith('charset=') || p === 'charset=utf-8' || p === 'charset="utf-8"');
}

/**
 * The REST facade: trpc-to-openapi runs the procedures; this wrapper adds what the contract needs
 * around it: alias rewrites, 404/405 with Allow, strict JSON bodies (413/415/400), and the envelope
 * for errors (trpc-to-openapi renders its own error shape, which is swapped for the mapped one).
 */
export function createRestHandler(router: AppRouter, paths: Record<string, object>, services: Services) {
  const routes = buildRouteTable(paths);
  const limit = services.config.MAX_BODY_BYTES;
  const parseJson = express.json({ limit, strict: true, type: () => true });

  const openapi = createOpenApiNodeHttpHandler({
    router,
    maxBodySize: limit,
    createContext: ({ req, res }): Context => {
      const locals = (res as Response).locals;
      const ctx = createContextValue(services, 'rest', req.headers, String(locals?.requestId ?? ''));
      // The access log reads what the procedure and the idempotency engine recorded.
      if (locals) locals.response = ctx.response;
      return ctx;
    },
    responseMeta: ({ ctx, errors }) => {
      if (errors.length > 0) {
        const mapped = toErrorResponse(errors[0]);
        return { status: mapped.status, headers: { ...mapped.headers, ...pick(ctx?.response.headers) } };
      }
      return { status: ctx?.response.status ?? 200, headers: ctx?.response.headers ?? {} };
    },
    onError: ({ error, req }) => {
      const mapped = toErrorResponse(error);
      (req as RestRequest)[ERROR_KEY] = mapped;
      if (mapped.internal)
        services.logger.error(
          { err: error, reqId: (req as Request).res?.locals.requestId },
          'unhandled error',
        );
    },
  });

  return async (req: Request, res: Response, next: NextFunction) => {
    const path = req.path;
    const route = matchRoute(routes, path);
    if (!route) return next();
    res.locals.route = route.canonical;
    if (!route.methods.includes(req.method)) return sendError(res, new MethodNotAllowed(route.methods));

    const target = canonicalPath(route, path);
    if (target !== path) req.url = target + req.url.slice(req.path.length);

    if (BODY_METHODS.has(req.method)) {
      if (!isJson(req.headers['content-type'])) return sendError(res, new UnsupportedMediaType());
      try {
        await new Promise<void>((resolve, reject) =>
          parseJson(req, res, (err?: unknown) => (err ? reject(err) : resolve())),
        );
      } catch (err) {
        return next(err);
      }
      // Media types are case-insensitive, but trpc-to-openapi compares with a case-sensitive
      // startsWith: `Application/JSON` passed the check above and then got its 415.
      req.headers['content-type'] = 'application/json';
      if (req.body === undefined) req.body = {};
      if (typeof req.body !== 'object' || req.body === null || Array.isArray(req.body)) {
        return sendError(res, new ValidationError('body', 'must be a JSON object'));
      }
      const smuggled = bodyKeyNeverAllowed(req.body, route.canonical);
      if (smuggled) return sendError(res, new ValidationError(smuggled, `Unrecognized key: "${smuggled}"`));
    }

    // Swap trpc-to-openapi's error body for the envelope computed in onError (same mapping as tRPC).
    const end = res.end.bind(res) as (...args: unknown[]) => Response;
    res.end = ((...args: unknown[]) => {
      const mapped = (req as RestRequest)[ERROR_KEY];
      if (mapped) {
        res.locals.businessCode = mapped.body.code;
        return end(JSON.stringify(mapped.body));
      }
      if (res.statusCode === 204) {
        res.removeHeader('Content-Type');
        return end();
      }
      return end(...args);
    }) as Response['end'];
    await openapi(req, res, next);
  };
}

/**
 * Top-level body keys the procedure's strict schema would never see, so they are refused here.
 * trpc-to-openapi builds the input with `Object.assign({}, body, pathParams)`: a `__proto__` key
 * becomes the input's prototype (its fields then pass validation as inherited values, and no
 * unknown-key check fires), and a key named like a path parameter is silently overwritten by it.
 */
function bodyKeyNeverAllowed(body: object, template: string): string | undefined {
  if (Object.hasOwn(body, '__proto__')) return '__proto__';
  for (const [, param] of template.matchAll(/\{(.+?)\}/g)) {
    if (Object.hasOwn(body, param)) return param;
  }
  return undefined;
}

function pick(headers: Record<string, string> | undefined): Record<string, string> {
  // Only the replay marker survives onto an error answer (a replayed FAILED_FINAL).
  return headers?.['Idempotent-Replayed'] ? { 'Idempotent-Replayed': 'true' } : {};
}

export type { AppError };

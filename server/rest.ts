import type { IncomingMessage } from 'node:http';
import express, { type NextFunction, type Request, type Response } from 'express';
import { createOpenApiNodeHttpHandler } from 'trpc-to-openapi';
import { MethodNotAllowed, UnsupportedMediaType, ValidationError } from '../core/errors.js';
import { templateParams } from '../core/path-template.js';
import { deliveredFor, errorMeta } from '../routers/answer.js';
import { errorAnswer } from '../routers/error-answer.js';
import type { AppRouter } from '../routers/index.js';
import { metaByProcedure } from '../routers/meta.js';
import type { AppServices } from './app-services.js';
import { contextFor } from './context-for.js';
import { sendError } from './http-errors.js';
import { buildRouteTable, canonicalPath, matchRoute } from './rest-routes.js';

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
 * around it: alias rewrites, 404/405 with Allow, strict JSON bodies (413/415/400), the status each
 * procedure declares, and the envelope for errors.
 */
export function createRestHandler(router: AppRouter, paths: Record<string, object>, services: AppServices) {
  const routes = buildRouteTable(paths);
  const limit = services.config.MAX_BODY_BYTES;
  const parseJson = express.json({ limit, strict: true, type: () => true });
  // A success answered without the answer edge (a plain procedure) has the status its meta declares.
  const declaredStatus = new Map(
    [...metaByProcedure(router)].map(([path, meta]) => [path, meta.successStatus ?? 200]),
  );
  // The error each failed request ended with, for its body (see the res.end wrapper below).
  const failures = new WeakMap<IncomingMessage, unknown>();

  const openapi = createOpenApiNodeHttpHandler({
    router,
    maxBodySize: limit,
    createContext: ({ req, info }) => contextFor(services, req, info.signal),
    responseMeta: ({ ctx, errors, paths: called }) => {
      if (errors.length > 0) return errorMeta(errors[0], ctx?.request);
      const delivered = deliveredFor(ctx?.request);
      return {
        status: delivered?.status ?? declaredStatus.get(called?.[0] ?? '') ?? 200,
        headers: delivered?.headers ?? {},
      };
    },
    onError: ({ error, req }) => {
      failures.set(req, error);
      if (errorAnswer(error).internal) {
        services.logger.error(
          { err: error, reqId: (req as Request).res?.locals.requestId },
          'unhandled error',
        );
      }
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

    // The one gap of trpc-to-openapi: it writes its own error body, `{...errorShape, code: error.code,
    // issues}` (adapters/node-http/core.mjs), never the envelope. Its status and headers come from
    // responseMeta above; only the body is swapped here. A 204 must have no body and no Content-Type,
    // which it also sets on every answer.
    const end = res.end.bind(res) as (...args: unknown[]) => Response;
    res.end = ((...args: unknown[]) => {
      if (failures.has(req)) return end(JSON.stringify(errorAnswer(failures.get(req)).body));
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
  return templateParams(template).find((param) => Object.hasOwn(body, param));
}

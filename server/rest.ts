import { type AnyRouter, callProcedure } from '@trpc/server/unstable-core-do-not-import';
import express, { type NextFunction, type Request, type Response } from 'express';
import { MethodNotAllowed, UnsupportedMediaType, ValidationError } from '../core/errors.js';
import { templateParams } from '../core/path-template.js';
import { deliveredFor, errorMeta } from '../routers/answer.js';
import { errorAnswer } from '../routers/error-answer.js';
import type { AppRouter } from '../routers/index.js';
import { metaByProcedure } from '../routers/meta.js';
import type { AppServices } from './app-services.js';
import { clientGone, contextFor } from './context-for.js';
import { sendError } from './http-errors.js';
import { buildRouteTable, matchRoute } from './rest-routes.js';

const BODY_METHODS = new Set(['POST', 'PUT', 'PATCH']);

/** `application/json`, optionally with `charset=utf-8`; anything else is 415. */
export function isJson(contentType: string | undefined): boolean {
  if (!contentType) return false;
  const [type, ...params] = contentType.split(';').map((p) => p.trim().toLowerCase());
  if (type !== 'application/json') return false;
  return params.every((p) => !p.startsWith('charset=') || p === 'charset=utf-8' || p === 'charset="utf-8"');
}

/** A procedure as the REST facade calls it: resolved once at start, not per request. */
interface RestProcedure {
  path: string;
  type: 'query' | 'mutation';
  /** The success status when the answer edge recorded none (a plain procedure). */
  declaredStatus: number;
}

/**
 * Every procedure with an OpenAPI path, by `METHOD template`. The facade builds each input as one
 * object (body or query, then path parameters), so every such procedure must take one object input.
 */
function restProcedures(router: AnyRouter): Map<string, RestProcedure> {
  const table = new Map<string, RestProcedure>();
  const meta = metaByProcedure(router);
  const procedures: Record<
    string,
    { _def: { type: string; inputs: Array<{ _zod?: { def: { type: string } } }> } }
  > = router._def.procedures;
  for (const [path, { _def: def }] of Object.entries(procedures)) {
    const openapi = meta.get(path)?.openapi;
    if (!openapi) continue;
    if (def.inputs.length !== 1 || def.inputs[0]._zod?.def.type !== 'object') {
      throw new Error(`REST procedure ${path} must take one z.object input`);
    }
    const type = def.type;
    if (type !== 'query' && type !== 'mutation') throw new Error(`REST procedure ${path} is a ${type}`);
    table.set(`${openapi.method.toUpperCase()} ${openapi.path}`, {
      path,
      type,
      declaredStatus: meta.get(path)?.successStatus ?? 200,
    });
  }
  return table;
}

/**
 * The query string as an input object: a key given once is a string, a key given more than once an
 * array of them (which a string field refuses), an empty value is absent (so its default applies).
 */
function queryInput(query: Record<string, unknown>): Record<string, unknown> {
  const input: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(query)) {
    if (!value) continue;
    input[key] = Array.isArray(value) && value.length === 1 ? value[0] : value;
  }
  return input;
}

/**
 * The REST facade: routes each canonical path or alias to its procedure and calls it directly (the
 * tRPC procedure chain: auth, input and output validation, the handler), adding what the contract needs
 * around it: 404/405 with Allow, strict JSON bodies (413/415/400), the status each answer declares,
 * and the envelope for errors. The OpenAPI document is generated from the same procedures' meta
 * (server/openapi.ts); trpc-to-openapi's own per-request adapter is not used (it built a WHATWG
 * Request and a caller proxy per request: about a tenth of the service's CPU on a create).
 */
export function createRestHandler(router: AppRouter, paths: Record<string, object>, services: AppServices) {
  const routes = buildRouteTable(paths);
  const procedures = restProcedures(router);
  const limit = services.config.MAX_BODY_BYTES;
  const parseJson = express.json({ limit, strict: true, type: () => true });

  const send = (res: Response, status: number, headers: Record<string, string>, body: unknown) => {
    res.statusCode = status;
    for (const [name, value] of Object.entries(headers)) res.setHeader(name, value);
    // A 204 has no body and no Content-Type.
    if (status === 204 || body === undefined) return res.end();
    res.setHeader('Content-Type', 'application/json');
    res.end(JSON.stringify(body));
  };

  return async (req: Request, res: Response, next: NextFunction) => {
    const path = req.path;
    const matched = matchRoute(routes, path);
    if (!matched) return next();
    const { route, params } = matched;
    res.locals.route = route.canonical;
    const procedure = procedures.get(`${req.method} ${route.canonical}`);
    if (!procedure || !route.methods.includes(req.method)) {
      return sendError(res, new MethodNotAllowed(route.methods));
    }

    let fields: Record<string, unknown>;
    if (BODY_METHODS.has(req.method)) {
      if (!isJson(req.headers['content-type'])) return sendError(res, new UnsupportedMediaType());
      try {
        await new Promise<void>((resolve, reject) =>
          parseJson(req, res, (err?: unknown) => (err ? reject(err) : resolve())),
        );
      } catch (err) {
        return next(err);
      }
      if (req.body === undefined) req.body = {};
      if (typeof req.body !== 'object' || req.body === null || Array.isArray(req.body)) {
        return sendError(res, new ValidationError('body', 'must be a JSON object'));
      }
      const smuggled = bodyKeyNeverAllowed(req.body, route.canonical);
      if (smuggled) return sendError(res, new ValidationError(smuggled, `Unrecognized key: "${smuggled}"`));
      fields = req.body;
    } else {
      fields = queryInput(req.query as Record<string, unknown>);
    }
    // Path parameters as they stand in the URL (an alias has the same names as its canonical path).
    const input = { ...fields, ...params };

    const ctx = contextFor(services, req, clientGone(res));
    try {
      const data = await callProcedure({
        router,
        ctx,
        path: procedure.path,
        type: procedure.type,
        getRawInput: async () => input,
        signal: undefined,
        batchIndex: 0,
      });
      const delivered = deliveredFor(req);
      send(res, delivered?.status ?? procedure.declaredStatus, delivered?.headers ?? {}, data);
    } catch (error) {
      const answer = errorAnswer(error);
      if (answer.internal) {
        services.logger.error({ err: error, reqId: res.locals.requestId }, 'unhandled error');
      }
      const meta = errorMeta(error, req);
      send(res, meta.status, meta.headers, answer.body);
    }
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

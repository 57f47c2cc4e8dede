import type { IncomingMessage, ServerResponse } from 'node:http';
import { parse as parseQuery } from 'node:querystring';
import type { AnyRouter } from '@trpc/server';
import express from 'express';
import { z } from 'zod';
import { MethodNotAllowed, UnsupportedMediaType, ValidationError } from '../core/errors.js';
import { templateParams } from '../core/path-template.js';
import { type Delivered, deliveredFor, errorMeta } from '../routers/answer.js';
import { errorAnswer } from '../routers/error-answer.js';
import type { AppRouter } from '../routers/index.js';
import { metaByProcedure } from '../routers/meta.js';
import { procedureCall, proceduresOf } from '../routers/trpc-internals.js';
import { frontRequestSetup } from './access-log.js';
import type { AppServices } from './app-services.js';
import { clientGone, contextFor } from './context-for.js';
import { bodyReadError, sendError, writeJson, writeJsonText } from './http-errors.js';
import { localsOf } from './locals.js';
import { buildRouteTable, matchRoute, type RestRoute } from './rest-routes.js';

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
  /** Runs the procedure's middlewares and resolver (routers/trpc-internals.ts procedureCall). */
  call: ReturnType<typeof procedureCall>;
}

/**
 * Every procedure with an OpenAPI path, by `METHOD template`. The facade builds each input as one
 * object (body or query, then path parameters), so every such procedure must take one object input.
 */
function restProcedures(router: AnyRouter): Map<string, RestProcedure> {
  const table = new Map<string, RestProcedure>();
  const meta = metaByProcedure(router);
  for (const { path, type, inputs } of proceduresOf(router)) {
    const openapi = meta.get(path)?.openapi;
    if (!openapi) continue;
    if (inputs.length !== 1 || !(inputs[0] instanceof z.ZodObject)) {
      throw new Error(`REST procedure ${path} must take one z.object input`);
    }
    if (type !== 'query' && type !== 'mutation') throw new Error(`REST procedure ${path} is a ${type}`);
    table.set(`${openapi.method.toUpperCase()} ${openapi.path}`, {
      path,
      type,
      declaredStatus: meta.get(path)?.successStatus ?? 200,
      call: procedureCall(router, path),
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

/** The path and the raw query string of a request target (origin-form, or absolute-form). */
function splitTarget(url: string): { path: string; query: string } | undefined {
  if (url.startsWith('/')) {
    const q = url.indexOf('?');
    return q === -1 ? { path: url, query: '' } : { path: url.slice(0, q), query: url.slice(q + 1) };
  }
  try {
    const u = new URL(url);
    return { path: u.pathname, query: u.search.slice(1) };
  } catch {
    return undefined;
  }
}

/**
 * The REST front: answers every request for a REST route (a canonical path or an alias) before, and
 * without, Express. It does for these requests what Express's layers do for the others (request id,
 * route label, access log, duration metric: the same functions), routes each to its procedure and
 * calls it directly (the procedure's chain: auth, input and output validation, the handler;
 * routers/trpc-internals.ts procedureCall), adding what the contract needs around it: 405 with Allow, strict JSON
 * bodies (413/415/400, read by body-parser as before), the status each answer declares, and the
 * envelope for errors. The OpenAPI document is generated from the same procedures' meta
 * (server/openapi.ts).
 *
 * Why outside Express: Express 5 costs about 0.2 ms of CPU per request on this machine over a plain
 * node handler doing the same work with the same body parser (0.27-0.30 against 0.08 ms, measured
 * in docs/BENCHMARKS.md), a quarter of a create's CPU. Everything that is not a REST route (health,
 * docs, metrics, the document, tRPC, unknown paths, a trailing slash) goes on to Express.
 *
 * Returns false, having touched nothing, when the request is not for a REST route.
 */
export function createRestFront(router: AppRouter, paths: Record<string, object>, services: AppServices) {
  const routes = buildRouteTable(paths);
  const procedures = restProcedures(router);
  const limit = services.config.MAX_BODY_BYTES;
  // Not strict: body-parser's strict mode refuses a top-level `null`, `42` or `"x"` as a parse error
  // ("malformed JSON"), though each is well-formed JSON; the check below names what is wrong.
  const parseJson = express.json({ limit, strict: false, type: () => true });
  const setUp = frontRequestSetup(services.logger, services.metrics);
  const { logger } = services;

  const answer = async (req: IncomingMessage & { body?: unknown }, res: ServerResponse, found: Found) => {
    const { route, params, procedure, query } = found;
    let fields: Record<string, unknown>;
    if (BODY_METHODS.has(req.method ?? '')) {
      if (!isJson(req.headers['content-type'])) return sendError(res, new UnsupportedMediaType());
      try {
        await new Promise<void>((resolve, reject) =>
          parseJson(req, res, (err?: unknown) => (err ? reject(err) : resolve())),
        );
      } catch (err) {
        return sendError(res, bodyReadError(err, logger, limit));
      }
      // body-parser leaves req.body unset only when there is no body at all; a JSON `null` is kept.
      const body = req.body === undefined ? {} : req.body;
      if (typeof body !== 'object' || body === null || Array.isArray(body)) {
        return sendError(res, new ValidationError('body', 'must be a JSON object'));
      }
      const smuggled = bodyKeyNeverAllowed(body, route.canonical);
      if (smuggled) return sendError(res, new ValidationError(smuggled, `Unrecognized key: "${smuggled}"`));
      fields = body as Record<string, unknown>;
    } else {
      fields = queryInput(parseQuery(query));
    }
    // Path parameters as they stand in the URL (an alias has the same names as its canonical path).
    const input = { ...fields, ...params };

    const ctx = contextFor(services, req, res, clientGone(res));
    try {
      const data = await procedure.call({
        ctx,
        path: procedure.path,
        type: procedure.type,
        input: undefined,
        getRawInput: async () => input,
        signal: undefined,
        batchIndex: 0,
      });
      sendResult(res, deliveredFor(req), procedure.declaredStatus, data);
    } catch (error) {
      const answer = errorAnswer(error);
      if (answer.internal) {
        logger.error({ err: error, reqId: localsOf(res).requestId }, 'unhandled error');
      }
      const meta = errorMeta(error, req);
      writeJson(res, meta.status, meta.headers, answer.body);
    }
  };

  return (req: IncomingMessage, res: ServerResponse): boolean => {
    const target = splitTarget(req.url ?? '/');
    // A trailing slash is never a route (CONTRACT section 3): Express answers its 404.
    if (!target || (target.path.length > 1 && target.path.endsWith('/'))) return false;
    const matched = matchRoute(routes, target.path);
    if (!matched) return false;
    const { route, params } = matched;
    setUp(req, res, route.canonical);
    const procedure = procedures.get(`${req.method} ${route.canonical}`);
    if (!procedure || !route.methods.includes(req.method ?? '')) {
      sendError(res, new MethodNotAllowed(route.methods));
      return true;
    }
    answer(req, res, { route, params, procedure, query: target.query }).catch((err: unknown) => {
      logger.error({ err, reqId: localsOf(res).requestId }, 'unhandled error');
      if (!res.headersSent) sendError(res, err);
      else res.destroy();
    });
    return true;
  };
}

/**
 * A procedure's result with the status and headers its answer recorded. A replayed success goes out
 * as the bytes stored with its record (the first answer's), not serialised again (routers/answer.ts).
 */
function sendResult(res: ServerResponse, delivered: Delivered | undefined, declared: number, data: unknown) {
  const status = delivered?.status ?? declared;
  const headers = delivered?.headers ?? {};
  if (delivered?.bodyJson !== undefined) writeJsonText(res, status, headers, delivered.bodyJson);
  else writeJson(res, status, headers, data);
}

/** A request for a REST route, once routed. */
interface Found {
  route: RestRoute;
  params: Record<string, string>;
  procedure: RestProcedure;
  query: string;
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

import type { IncomingMessage, RequestListener, ServerResponse } from 'node:http';
import { createExpressMiddleware } from '@trpc/server/adapters/express';
import express, { type Request, type Response } from 'express';
import { MethodNotAllowed, NotFound, UnsupportedMediaType } from '../core/errors.js';
import { setFailpoints } from '../core/failpoints.js';
import { deliveredFor, errorMeta } from '../routers/answer.js';
import { errorAnswer } from '../routers/error-answer.js';
import { appRouter } from '../routers/index.js';
import { proceduresOf, rootConfigOf } from '../routers/trpc-internals.js';
import { accessLog, observeDuration } from './access-log.js';
import type { AppServices } from './app-services.js';
import { contextFor } from './context-for.js';
import { docsRouter } from './docs.js';
import { exportFileRoutes } from './export-file.js';
import { healthRouter } from './health.js';
import { errorHandler, notFoundHandler, sendError, writeJson, writeJsonText } from './http-errors.js';
import { localsOf } from './locals.js';
import { buildOpenApiDocument } from './openapi.js';
import { requestId } from './request-id.js';
import { createRestFront, isJson } from './rest.js';
import { subscriptionGate } from './subscription-gate.js';
import { createTrpcFront } from './trpc-front.js';
import { writeRefusal } from './trpc-reply.js';

/**
 * The service's request listener: the REST front (server/rest.ts) answers the REST routes, the load
 * of the service, and the tRPC front (server/trpc-front.ts) a single POST of a tRPC mutation, both
 * without Express; every other request goes on to the Express app below.
 */
export function createApp(services: AppServices): RequestListener {
  const openapiDoc = buildOpenApiDocument(appRouter, '/');
  const rest = createRestFront(appRouter, openapiDoc.paths ?? {}, services);
  const trpc = createTrpcFront(appRouter, services);
  const app = createExpressApp(services, openapiDoc);
  return (req: IncomingMessage, res: ServerResponse) => {
    if (!rest(req, res) && !trpc(req, res)) app(req, res);
  };
}

function createExpressApp(services: AppServices, openapiDoc: ReturnType<typeof buildOpenApiDocument>) {
  const { config, logger } = services;
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  app.set('query parser', 'simple');

  const procedures = new Set(proceduresOf(appRouter).map((p) => p.path));
  const fixedRoutes = new Set(['/healthz', '/readyz', '/openapi.json', '/docs', '/metrics']);
  app.use(requestId);
  app.use((req, res, next) => {
    // Route label for logs and metrics: templates only, never raw paths (the REST front labels its own).
    const locals = localsOf(res);
    if (fixedRoutes.has(req.path)) locals.route = req.path;
    else if (req.path.startsWith('/docs/')) locals.route = '/docs/assets';
    else if (req.path.startsWith('/trpc/')) {
      const name = req.path.slice('/trpc/'.length);
      locals.route = procedures.has(name) ? `/trpc/${name}` : '/trpc/unknown';
    }
    next();
  });
  app.use(accessLog(logger));
  app.use(observeDuration(services.metrics));
  // Paths never end with a slash (CONTRACT section 3): no redirect, a plain 404.
  app.use((req, res, next) =>
    req.path.length > 1 && req.path.endsWith('/') ? sendError(res, new NotFound('No such path')) : next(),
  );

  app.use(healthRouter(services));
  // Test-only control channel for failpoints: mounted only with FAILPOINTS_CONTROL=1, which the
  // configuration refuses together with NODE_ENV=production.
  if (config.FAILPOINTS_CONTROL === '1' && config.NODE_ENV !== 'production') {
    app.put('/__failpoints', express.text({ type: '*/*' }), (req: Request, res: Response) => {
      try {
        setFailpoints(typeof req.body === 'string' ? req.body : '');
        res.status(204).end();
      } catch (err) {
        writeJson(res, 400, {}, { code: 400, message: (err as Error).message, data: null });
      }
    });
  }
  app.use(docsRouter());
  // The document is fixed once built: serialised once, not per request.
  const openapiJson = JSON.stringify(openapiDoc);
  app.get('/openapi.json', (_req: Request, res: Response) => writeJsonText(res, 200, {}, openapiJson));
  app.get('/metrics', async (_req: Request, res: Response) => {
    res.type(services.metrics.registry.contentType).send(await services.metrics.registry.metrics());
  });
  // Known paths, other methods: 405 with Allow (GET answers HEAD too).
  app.all(['/openapi.json', '/metrics'], (_req: Request, res: Response) =>
    sendError(res, new MethodNotAllowed(['GET'])),
  );

  app.use('/api/v1/exports', exportFileRoutes(services));

  // tRPC checks the media type itself but accepts any charset; hold it to the REST rule (415), in
  // tRPC's error format as tRPC gives its own 415 (no context yet; /trpc has no REST envelope).
  const trpcConfig = rootConfigOf(appRouter);
  app.use('/trpc', (req, res, next) => {
    const call = { path: req.path.slice(1), type: 'unknown' as const, request: req };
    // tRPC's adapter builds a WHATWG Request, which throws on TRACE and TRACK (a 500): 405 here, as
    // tRPC answers the other methods it does not serve.
    if (req.method === 'TRACE' || req.method === 'TRACK')
      return writeRefusal(res, trpcConfig, new MethodNotAllowed(['GET', 'POST']), call);
    if (req.method !== 'POST' || isJson(req.headers['content-type'])) return next();
    writeRefusal(res, trpcConfig, new UnsupportedMediaType(), call);
  });
  app.use('/trpc', subscriptionGate(appRouter, services));
  app.use(
    '/trpc',
    createExpressMiddleware({
      router: appRouter,
      allowBatching: false,
      maxBodySize: config.MAX_BODY_BYTES,
      createContext: ({ req, res, info }) => contextFor(services, req, res, info.signal),
      // tRPC answers a success with 200 and the payload (whose code says 202 or 200); the headers
      // of the answer (Location, Retry-After, Idempotent-Replayed) are set on this transport too.
      responseMeta: ({ ctx, errors }) =>
        errors.length > 0
          ? errorMeta(errors[0], ctx?.request)
          : { headers: deliveredFor(ctx?.request)?.headers ?? {} },
      onError: ({ error, req }) => {
        if (errorAnswer(error).internal) {
          const res = (req as Request).res;
          logger.error({ err: error, reqId: res ? localsOf(res).requestId : undefined }, 'unhandled error');
        }
      },
    }),
  );

  app.use(notFoundHandler);
  app.use(errorHandler(logger, config.MAX_BODY_BYTES));
  return app;
}

import { createExpressMiddleware } from '@trpc/server/adapters/express';
import express, { type Express, type Request, type Response } from 'express';
import { MethodNotAllowed, NotFound, toErrorResponse, UnsupportedMediaType } from '../core/errors.js';
import { createContextValue, type Services } from '../routers/context.js';
import { appRouter } from '../routers/index.js';
import { accessLog, observeDuration } from './access-log.js';
import { docsRouter } from './docs.js';
import { healthRouter } from './health.js';
import { errorHandler, notFoundHandler, sendError } from './http-errors.js';
import { buildOpenApiDocument } from './openapi.js';
import { requestId } from './request-id.js';
import { createRestHandler, isJson } from './rest.js';

export function createApp(services: Services): Express {
  const { config, logger } = services;
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  app.set('query parser', 'simple');

  const openapiDoc = buildOpenApiDocument(appRouter, '/');
  const procedures = new Set(Object.keys(appRouter._def.procedures));
  const fixedRoutes = new Set(['/healthz', '/readyz', '/openapi.json', '/docs', '/metrics']);
  app.use(requestId);
  app.use((req, res, next) => {
    // Route label for logs and metrics: templates only (set by the REST facade), never raw paths.
    if (fixedRoutes.has(req.path)) res.locals.route = req.path;
    else if (req.path.startsWith('/docs/')) res.locals.route = '/docs/assets';
    else if (req.path.startsWith('/trpc/')) {
      const name = req.path.slice('/trpc/'.length);
      res.locals.route = procedures.has(name) ? `/trpc/${name}` : '/trpc/unknown';
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
  app.use(docsRouter());
  app.get('/openapi.json', (_req: Request, res: Response) => {
    res.json(openapiDoc);
  });
  app.get('/metrics', async (_req: Request, res: Response) => {
    res.type(services.metrics.registry.contentType).send(await services.metrics.registry.metrics());
  });
  // Known paths, other methods: 405 with Allow (GET answers HEAD too).
  app.all(['/openapi.json', '/metrics'], (_req: Request, res: Response) =>
    sendError(res, new MethodNotAllowed(['GET'])),
  );

  // tRPC checks the media type itself but accepts any charset; hold it to the REST rule (415).
  app.use('/trpc', (req, res, next) =>
    req.method === 'POST' && !isJson(req.headers['content-type'])
      ? sendError(res, new UnsupportedMediaType())
      : next(),
  );
  app.use(
    '/trpc',
    createExpressMiddleware({
      router: appRouter,
      allowBatching: false,
      maxBodySize: config.MAX_BODY_BYTES,
      createContext: ({ req, res }) => {
        const ctx = createContextValue(services, 'trpc', req.headers, String(res.locals.requestId));
        // The access log reads what the procedure and the idempotency engine recorded.
        res.locals.response = ctx.response;
        return ctx;
      },
      responseMeta: ({ ctx, errors }) => {
        const headers = { ...(ctx?.response.headers ?? {}) };
        if (errors.length > 0) {
          const mapped = toErrorResponse(errors[0]);
          return { status: mapped.status, headers: { ...mapped.headers, ...headers } };
        }
        return { headers };
      },
      onError: ({ error, req }) => {
        const mapped = toErrorResponse(error);
        const res = (req as Request).res;
        if (res) res.locals.businessCode = mapped.body.code;
        if (mapped.internal) logger.error({ err: error, reqId: res?.locals.requestId }, 'unhandled error');
      },
    }),
  );

  app.use(createRestHandler(appRouter, openapiDoc.paths as Record<string, object>, services));
  app.use(notFoundHandler);
  app.use(errorHandler(logger, config.MAX_BODY_BYTES));
  return app;
}

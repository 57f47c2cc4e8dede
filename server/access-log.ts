import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Response } from 'express';
import type { Logger } from 'pino';
import { pinoHttp } from 'pino-http';
import { deliveredFor } from '../routers/answer.js';
import type { Metrics } from './metrics.js';

/** The route label: a template (never a raw path with ids in it, which would explode cardinality). */
export function routeOf(res: ServerResponse): string {
  return String((res as Response).locals?.route ?? 'unmatched');
}

/**
 * What the idempotency protocol did for this request, as the answer edge recorded it (absent when it
 * did not run: GET, no key, or an answer given before it, such as 401 or a validation 400).
 */
function idempotencyOutcome(req: IncomingMessage): string | undefined {
  return deliveredFor(req)?.outcome;
}

/**
 * One JSON line per request: request id, route, status, duration, idempotency outcome. Headers are
 * not logged at all (Authorization and cookies would be secrets); bodies never are.
 */
export function accessLog(logger: Logger) {
  return pinoHttp({
    logger,
    genReqId: (_req, res) => String((res as Response).locals?.requestId ?? ''),
    serializers: {
      req: (req: { method: string; url: string }) => ({ method: req.method, url: req.url.split('?')[0] }),
      res: (res: { statusCode: number }) => ({ statusCode: res.statusCode }),
    },
    // Added once the answer is known (customProps would also run at the start, duplicating keys).
    customSuccessObject: (req, res, val: object) => ({
      ...val,
      route: routeOf(res),
      idempotency: idempotencyOutcome(req),
    }),
    customErrorObject: (req, res, _err, val: object) => ({
      ...val,
      route: routeOf(res),
      idempotency: idempotencyOutcome(req),
    }),
    customLogLevel: (_req, res, err) => (err || res.statusCode >= 500 ? 'error' : 'info'),
    customSuccessMessage: (req, res) => `${req.method} ${routeOf(res)} ${res.statusCode}`,
    customErrorMessage: (req, res) => `${req.method} ${routeOf(res)} ${res.statusCode}`,
    quietReqLogger: true,
  });
}

/** Observes the duration histogram when the response is finished. */
export function observeDuration(metrics: Metrics) {
  return (req: IncomingMessage, res: ServerResponse, next: () => void) => {
    const end = metrics.httpDuration.startTimer();
    res.on('finish', () =>
      end({ route: routeOf(res), method: req.method ?? 'GET', status: String(res.statusCode) }),
    );
    next();
  };
}

import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import { deliveredFor } from '../routers/answer.js';
import { localsOf } from './locals.js';
import type { Metrics } from './metrics.js';
import { requestId } from './request-id.js';

/** The route label: a template (never a raw path with ids in it, which would explode cardinality). */
export function routeOf(res: ServerResponse): string {
  return localsOf(res).route ?? 'unmatched';
}

/**
 * What the idempotency protocol did for this request, as the answer edge recorded it (absent when it
 * did not run: GET, no key, or an answer given before it, such as 401 or a validation 400).
 */
function idempotencyOutcome(req: IncomingMessage): string | undefined {
  return deliveredFor(req)?.outcome;
}

/**
 * One JSON line per request, written when its answer is finished (or the client went away):
 * request id, method and path (no query string), route template, status, time, idempotency outcome.
 * Headers are not logged at all (Authorization and cookies would be secrets); bodies never are.
 * The line has the fields pino-http wrote (reqId, req, res, responseTime), built directly: pino-http
 * made two child loggers per request, about 3% of the service's CPU even with info lines off.
 */
export function accessLog(logger: Logger) {
  return (req: IncomingMessage, res: ServerResponse, next: () => void) => {
    // Neither level on (LOG_LEVEL=warn or above): nothing to write, nothing to watch.
    if (!logger.isLevelEnabled('info') && !logger.isLevelEnabled('error')) return next();
    const started = Date.now();
    let logged = false;
    const done = () => {
      if (logged) return;
      logged = true;
      const level = res.statusCode >= 500 ? 'error' : 'info';
      if (!logger.isLevelEnabled(level)) return;
      const route = routeOf(res);
      logger[level](
        {
          reqId: localsOf(res).requestId ?? '',
          req: { method: req.method, url: (req.url ?? '').split('?')[0] },
          res: { statusCode: res.statusCode },
          responseTime: Date.now() - started,
          route,
          idempotency: idempotencyOutcome(req),
        },
        `${req.method} ${route} ${res.statusCode}${res.writableFinished ? '' : ' (client went away)'}`,
      );
    };
    res.once('finish', done);
    res.once('close', done);
    next();
  };
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

/**
 * What Express's first layers do for a request (request id, route label, access log, duration
 * metric), for the fronts that answer outside Express (server/rest.ts, server/trpc-front.ts): the
 * same functions, in the same order.
 */
export function frontRequestSetup(logger: Logger, metrics: Metrics) {
  const logRequest = accessLog(logger);
  const timeRequest = observeDuration(metrics);
  const next = () => {};
  return (req: IncomingMessage, res: ServerResponse, route: string): void => {
    requestId(req, res, next);
    localsOf(res).route = route;
    logRequest(req, res, next);
    timeRequest(req, res, next);
  };
}

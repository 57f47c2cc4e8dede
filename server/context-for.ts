import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Request } from 'express';
import type { Cancellation } from '../idempotency/engine.js';
import { type Context, createContextValue, type Services } from '../routers/context.js';

/** The context of one HTTP request, on either transport (both adapters run inside express). */
export function contextFor(
  services: Services,
  request: IncomingMessage,
  signal: Cancellation | undefined,
): Context {
  const requestId = String((request as Request).res?.locals.requestId ?? '');
  return createContextValue(services, request.headers, requestId, { request, signal });
}

/**
 * Aborted once the client has gone away before its answer was sent (the connection closed): what the
 * engine's waits check. Read from the response when asked, so a request that never waits pays nothing.
 */
export function clientGone(res: ServerResponse): Cancellation {
  return {
    get aborted() {
      return res.closed && !res.writableFinished;
    },
  };
}

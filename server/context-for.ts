import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Cancellation } from '../idempotency/engine.js';
import { type Context, createContextValue, type Services } from '../routers/context.js';
import { localsOf } from './locals.js';

/** The context of one HTTP request, on either transport (the REST front, or tRPC's adapter in Express). */
export function contextFor(
  services: Services,
  request: IncomingMessage,
  response: ServerResponse,
  signal: Cancellation | undefined,
): Context {
  const requestId = localsOf(response).requestId ?? '';
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

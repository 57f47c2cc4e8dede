import type { IncomingMessage } from 'node:http';
import type { Request } from 'express';
import { type Context, createContextValue, type Services } from '../routers/context.js';

/** The context of one HTTP request, on either transport (both adapters run inside express). */
export function contextFor(
  services: Services,
  request: IncomingMessage,
  signal: AbortSignal | undefined,
): Context {
  const requestId = String((request as Request).res?.locals.requestId ?? '');
  return createContextValue(services, request.headers, requestId, { request, signal });
}

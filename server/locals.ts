import type { ServerResponse } from 'node:http';

/** What the request's own layers record on its response (Express keeps `res.locals` the same way). */
export interface Locals {
  /** The X-Request-Id of this request (server/request-id.ts). */
  requestId?: string;
  /** The route label of logs and metrics: a template, never a raw path. */
  route?: string;
}

/**
 * The response's locals, made on first use: the same `res.locals` object Express gives its
 * handlers, so the REST front (which runs before Express) and Express's layers share one record.
 */
export function localsOf(res: ServerResponse): Locals {
  const r = res as ServerResponse & { locals?: Locals };
  r.locals ??= Object.create(null) as Locals;
  return r.locals;
}

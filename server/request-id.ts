import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { localsOf } from './locals.js';

const SAFE_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** Echoes a well-formed X-Request-Id, otherwise makes one (a hostile id never reaches the logs). */
export function requestId(req: IncomingMessage, res: ServerResponse, next: () => void): void {
  const incoming = req.headers['x-request-id'];
  const id = typeof incoming === 'string' && SAFE_ID.test(incoming) ? incoming : randomUUID();
  localsOf(res).requestId = id;
  res.setHeader('X-Request-Id', id);
  next();
}

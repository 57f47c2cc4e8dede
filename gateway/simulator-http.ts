// The simulator's HTTP plumbing (node:http only), shared by its charge and refund handlers.
import { randomBytes } from 'node:crypto';
import type http from 'node:http';
import type { z } from 'zod';
import type { Faults } from './types.js';
import { firstProblem } from './wire.js';

const MAX_BODY_BYTES = 64 * 1024;

export class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

export const newId = (prefix: string) => `${prefix}_${randomBytes(12).toString('hex')}`;
export const hit = (rate: number | undefined) => rate !== undefined && rate > 0 && Math.random() < rate;

/** A request body checked against its wire schema: 400 with the first problem otherwise. */
export function parse<T extends z.ZodType>(schema: T, body: unknown): z.infer<T> {
  const parsed = schema.safeParse(body);
  if (!parsed.success) throw new HttpError(400, firstProblem(parsed.error));
  return parsed.data;
}

export async function readJson(req: http.IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  // Keep draining past the limit (without storing) so that the 413 can still be written back.
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size <= MAX_BODY_BYTES) chunks.push(chunk);
  }
  if (size > MAX_BODY_BYTES) throw new HttpError(413, 'body too large');
  try {
    return JSON.parse(Buffer.concat(chunks).toString('utf8'));
  } catch {
    throw new HttpError(400, 'malformed JSON body');
  }
}

export function send(
  res: http.ServerResponse,
  status: number,
  body: unknown,
  headers: http.OutgoingHttpHeaders = {},
) {
  if (res.headersSent || res.destroyed) return;
  const text = JSON.stringify(body);
  res.writeHead(status, {
    ...headers,
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(text),
  });
  res.end(text);
}

/**
 * The answer to an effect's POST (a charge or a business refund) that is already recorded, under
 * the request's fault snapshot: delayed, never answered, cut, or sent. The effect is recorded before
 * this runs, so a caller that gave up meanwhile finds it by querying.
 */
export async function deliver(
  req: http.IncomingMessage,
  res: http.ServerResponse,
  f: Faults,
  sleep: (ms: number) => Promise<void>,
  record: unknown,
) {
  if (f.latencyMs) await sleep(f.latencyMs);
  if (hit(f.timeoutAfterChargeRate)) return; // never answer; close() or the client ends the socket
  if (hit(f.resetAfterChargeRate)) return req.socket.resetAndDestroy();
  send(res, 200, record);
}

/**
 * A simulated 5xx, only where the request would have done something: a replay never gets one,
 * because the contract lets the caller read any 5xx as "nothing was done".
 */
export async function serverError(
  res: http.ServerResponse,
  f: Faults,
  sleep: (ms: number) => Promise<void>,
  what: string,
) {
  if (f.latencyMs) await sleep(f.latencyMs);
  send(res, 500, { error: `simulated gateway error; nothing was ${what}` });
}

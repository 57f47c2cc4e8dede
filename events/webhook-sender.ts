import { randomBytes } from 'node:crypto';
import http from 'node:http';
import https from 'node:https';
import type { LookupFunction } from 'node:net';
import { Webhook } from 'standardwebhooks';
import {
  type DestinationPolicy,
  DestinationRefused,
  parseDestinationUrl,
  type ResolveAll,
  type ResolvedAddress,
  resolveDestination,
} from './destination-guard.js';

export type WebhookEndpoint = { url: string; secret: string };
/** The Event of CONTRACT section 12, sent as the body. */
export type OutgoingEvent = { id: string; type: string; createdAt: string; data: unknown };
export type DeliverOptions = {
  timeoutMs: number;
  policy: DestinationPolicy;
  /** The signature's timestamp (tests fix it). */
  now?: () => Date;
  resolveAll?: ResolveAll;
};
export type AttemptResult =
  | { ok: true; statusCode: number; error: null }
  | { ok: false; statusCode: number | null; error: string };

/** A receiver's answer is read only this far, then dropped: an endless body cannot hold the worker. */
export const MAX_RESPONSE_BYTES = 64 * 1024;
const MAX_ERROR_LENGTH = 200;

/** A new endpoint secret: 32 random bytes (the Standard Webhooks range is 24–64). */
export const newWebhookSecret = () => `whsec_${randomBytes(32).toString('base64')}`;

/** Answers every lookup with the address already checked, so the connect cannot re-resolve. */
const pinnedLookup =
  (pinned: ResolvedAddress): LookupFunction =>
  (_hostname, options, callback) => {
    // Node 20's connect (autoSelectFamily) asks for all addresses; older paths ask for one.
    if (options.all) (callback as (e: null, a: ResolvedAddress[]) => void)(null, [pinned]);
    else callback(null, pinned.address, pinned.family);
  };

function describe(err: unknown, timeoutMs: number): string {
  if (err instanceof DestinationRefused) return err.message;
  const code = (err as NodeJS.ErrnoException).code;
  if (code === 'ETIMEDOUT') return `timed out after ${timeoutMs} ms`;
  if (code === 'ECONNREFUSED') return 'connection refused (ECONNREFUSED)';
  if (code === 'ECONNRESET') return 'connection reset (ECONNRESET)';
  return code ? `request failed (${code})` : 'request failed';
}

/**
 * One delivery attempt: POSTs the event signed with the Standard Webhooks headers to the pinned
 * address. Never throws; the result's error is short and never holds the secret or the body.
 */
export async function deliverOnce(
  endpoint: WebhookEndpoint,
  event: OutgoingEvent,
  options: DeliverOptions,
): Promise<AttemptResult> {
  let pinned: ResolvedAddress;
  let url: URL;
  try {
    url = parseDestinationUrl(endpoint.url);
    pinned = await resolveDestination(url, options.policy, options.resolveAll);
  } catch (err) {
    return { ok: false, statusCode: null, error: describe(err, options.timeoutMs) };
  }
  const body = JSON.stringify(event);
  const timestamp = options.now?.() ?? new Date();
  let signature: string;
  try {
    signature = new Webhook(endpoint.secret).sign(event.id, timestamp, body);
  } catch {
    // The library's message could quote the secret; ours names only the problem.
    return { ok: false, statusCode: null, error: 'the endpoint secret is not a whsec_ base64 secret' };
  }
  const outcome = await post(url, pinned, body, options.timeoutMs, {
    'content-type': 'application/json',
    'webhook-id': event.id,
    'webhook-timestamp': String(Math.floor(timestamp.getTime() / 1000)),
    'webhook-signature': signature,
  });
  if (typeof outcome !== 'number')
    return { ok: false, statusCode: null, error: describe(outcome, options.timeoutMs) };
  if (outcome >= 200 && outcome < 300) return { ok: true, statusCode: outcome, error: null };
  const error =
    outcome >= 300 && outcome < 400
      ? `redirect (HTTP ${outcome}) not followed`
      : `HTTP ${outcome} from the receiver`;
  return { ok: false, statusCode: outcome, error: error.slice(0, MAX_ERROR_LENGTH) };
}

/** The status code once the (capped) answer is read, or the error; one deadline covers it all. */
function post(
  url: URL,
  pinned: ResolvedAddress,
  body: string,
  timeoutMs: number,
  headers: Record<string, string>,
): Promise<number | Error> {
  return new Promise((resolve) => {
    const transport = url.protocol === 'https:' ? https : http;
    // No agent: a pooled socket would outlive this attempt's pinned address and its deadline.
    const request = transport.request(url, {
      method: 'POST',
      agent: false,
      lookup: pinnedLookup(pinned),
      headers: { ...headers, 'content-length': String(Buffer.byteLength(body)) },
    });
    const deadline = setTimeout(() => {
      request.destroy(Object.assign(new Error('timed out'), { code: 'ETIMEDOUT' }));
    }, timeoutMs);
    const finish = (result: number | Error) => {
      clearTimeout(deadline);
      resolve(result);
    };
    request.on('error', finish);
    request.on('response', (response) => {
      let received = 0;
      const status = response.statusCode ?? 0;
      response.on('data', (chunk: Buffer) => {
        received += chunk.length;
        if (received > MAX_RESPONSE_BYTES) {
          response.destroy();
          finish(status);
        }
      });
      response.on('end', () => finish(status));
      response.on('error', finish);
    });
    request.end(body);
  });
}

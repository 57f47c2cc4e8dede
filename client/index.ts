/**
 * Typed clients that carry the key and retry safely (the client's half of CONTRACT section 5):
 *
 *   const { trpc, rest } = createServiceClient({ url: 'http://127.0.0.1:3000', token });
 *   await trpc.payments.create.mutate({ merchantOrderNo: 'A-1', amount: '10.50' });
 *   await rest.POST('/api/v1/payments', { body: { merchantOrderNo: 'A-1', amount: '10.50' } });
 *   const { data } = await trpc.exports.create.mutate({ resource: 'orders' }); // 202: data.resourceId
 *   await waitForExport(trpc, data.resourceId); // SUCCEEDED or FAILED; the file: GET /api/v1/exports/{id}/file
 *
 * Every mutation gets one Idempotency-Key per call (or the caller's own: tRPC
 * `{ context: { idempotencyKey } }`, REST `params.header['Idempotency-Key']`) and is retried with it
 * on network errors, time-outs, 503 and 429 (a proxy's 502/504 too), after Retry-After, and followed
 * through 202, within a deadline; the caller's `signal` aborts a call and its waits.
 * Errors arrive as values: tRPC's TRPCClientError with `data.businessCode`, openapi-fetch's
 * `{ error }` with the envelope's `code`; past the deadline, StillProcessingError (key, Location)
 * or RetriesExhaustedError.
 */
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { createTRPCClient, httpLink, type TRPCLink } from '@trpc/client';
import { observable } from '@trpc/server/observable';
import createClient from 'openapi-fetch';
import type { AppRouter } from '../routers/index.js';
import type { paths } from './openapi-types.js';
import { type RetryOptions, retryingFetch } from './retrying-fetch.js';

export type { AppRouter } from '../routers/index.js';
export type { paths } from './openapi-types.js';
export {
  RetriesExhaustedError,
  type RetryOptions,
  retryingFetch,
  StillProcessingError,
} from './retrying-fetch.js';

export interface ServiceClientOptions {
  /** The service's base URL, e.g. http://127.0.0.1:3000 (or a balancer in front of instances). */
  url: string;
  /** A bearer token (POST /api/v1/tokens, or `npm run token`). */
  token: string;
  retry?: RetryOptions;
  /** The fetch underneath (tests, proxies); the global fetch by default. */
  fetch?: typeof fetch;
}

/**
 * A tRPC link that gives every mutation its Idempotency-Key: the caller's
 * (`context.idempotencyKey`) or a new one, made once per call, before any retry. The key travels in
 * the operation's context; the terminating link sends it as the header with `idempotencyHeaders`
 * (`httpLink({ url, headers: ({ op }) => ({ ...idempotencyHeaders(op), authorization }) })`), as
 * `createServiceClient` does. Retries happen in the fetch underneath (`retryingFetch`).
 */
export function idempotencyLink(): TRPCLink<AppRouter> {
  return () =>
    ({ op, next }) =>
      observable((observer) => {
        const context =
          op.type === 'mutation' && typeof op.context.idempotencyKey !== 'string'
            ? { ...op.context, idempotencyKey: randomUUID() }
            : op.context;
        return next({ ...op, context }).subscribe(observer);
      });
}

/** The Idempotency-Key header of an operation whose context carries one (see idempotencyLink). */
export function idempotencyHeaders(op: { context: Record<string, unknown> }): Record<string, string> {
  const key = op.context.idempotencyKey;
  return typeof key === 'string' ? { 'idempotency-key': key } : {};
}

/** A new Idempotency-Key for one logical call (REST: the document makes the header required). */
export const newIdempotencyKey = (): string => randomUUID();

export function createServiceClient(options: ServiceClientOptions) {
  const send = retryingFetch(options.retry, options.fetch ?? fetch);
  const authorization = `Bearer ${options.token}`;
  const trpc = createTRPCClient<AppRouter>({
    links: [
      idempotencyLink(),
      httpLink({
        url: `${options.url.replace(/\/+$/, '')}/trpc`,
        headers: ({ op }) => ({ authorization, ...idempotencyHeaders(op) }),
        fetch: (url, init) => send(new Request(String(url), init as RequestInit)),
      }),
    ],
  });
  const rest = createClient<paths>({
    baseUrl: options.url.replace(/\/+$/, ''),
    headers: { authorization },
    fetch: send,
  });
  return { trpc, rest, waitForExport: (id: string, wait?: WaitOptions) => waitForExport(trpc, id, wait) };
}

export interface WaitOptions {
  /** How long to wait in all (default 10 minutes): then ExportStillRunningError. */
  timeoutMs?: number;
  /** Between polls (default 1 s). */
  intervalMs?: number;
  signal?: AbortSignal;
}

/** The export was still PROCESSING when the wait ended; it goes on running: wait again, or poll. */
export class ExportStillRunningError extends Error {
  constructor(readonly exportId: string) {
    super(`export ${exportId} is still PROCESSING`);
    this.name = 'ExportStillRunningError';
  }
}

type TrpcClient = ReturnType<typeof createTRPCClient<AppRouter>>;
type ExportAnswer = Awaited<ReturnType<TrpcClient['exports']['get']['query']>>['data'];

/**
 * Waits (bounded) until an export is final: polls `exports.get` until it is SUCCEEDED or FAILED, and
 * returns it; its file is then at `GET /api/v1/exports/{id}/file`. (An event subscription can replace
 * the polling; polling is what any client can do.)
 */
export async function waitForExport(
  trpc: TrpcClient,
  id: string,
  options: WaitOptions = {},
): Promise<ExportAnswer> {
  const deadline = Date.now() + (options.timeoutMs ?? 600_000);
  const interval = options.intervalMs ?? 1000;
  for (;;) {
    const { data } = await trpc.exports.get.query({ id }, { signal: options.signal });
    if (data.status !== 'PROCESSING') return data;
    if (Date.now() + interval > deadline) throw new ExportStillRunningError(id);
    await sleep(interval, undefined, { signal: options.signal });
  }
}

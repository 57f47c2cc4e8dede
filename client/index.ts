/**
 * Typed clients that carry the key and retry safely (the client's half of CONTRACT section 5):
 *
 *   const { trpc, rest } = createServiceClient({ url: 'http://127.0.0.1:3000', token });
 *   await trpc.payments.create.mutate({ merchantOrderNo: 'A-1', amount: '10.50' });
 *   await rest.POST('/api/v1/payments', {
 *     params: { header: { 'Idempotency-Key': newIdempotencyKey() } },
 *     body: { merchantOrderNo: 'A-1', amount: '10.50' },
 *   });
 *   await trpc.refunds.create.mutate({ id: paymentId, amount: '2.50' }); // refunds: the same protocol
 *   const { data } = await trpc.exports.create.mutate({ resource: 'orders' });
 *   const id = 'resourceId' in data ? data.resourceId : data.id; // 202: the task id (null: not known yet)
 *   if (id) await waitForExport(trpc, id); // SUCCEEDED or FAILED; the file: GET /api/v1/exports/{id}/file
 *
 * (test/consumer/consumer.ts type-checks these calls.)
 *
 * Every mutation gets one Idempotency-Key per call (or the caller's own: tRPC
 * `{ context: { idempotencyKey } }`, REST `params.header['Idempotency-Key']`) and is retried with it
 * on network errors, time-outs, 503 and 429 (a proxy's 502/504 too), after Retry-After, and followed
 * through 202, within a deadline; the caller's `signal` aborts a call and its waits.
 * Errors arrive as values: tRPC's TRPCClientError with `data.businessCode`, openapi-fetch's
 * `{ error }` with the envelope's `code`; past the deadline, StillProcessingError (key, Location)
 * or RetriesExhaustedError.
 *
 * Events (CONTRACT section 12): `trpc.events.onEvent.subscribe({ types }, { onData })` runs over SSE
 * and resumes from its last event id after a reconnection; after a 202,
 * `await waitFor('payment', id)` resolves with the final payment on its event (polling GET when the
 * subscription cannot connect).
 */
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { createTRPCClient, httpLink, httpSubscriptionLink, splitLink, type TRPCLink } from '@trpc/client';
import type { inferRouterInputs } from '@trpc/server';
import { observable } from '@trpc/server/observable';
import { EventSource } from 'eventsource';
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
  const base = options.url.replace(/\/+$/, '');
  const send = retryingFetch(options.retry, options.fetch ?? fetch);
  const authorization = `Bearer ${options.token}`;
  const plainFetch = options.fetch ?? fetch;
  const trpc = createTRPCClient<AppRouter>({
    links: [
      idempotencyLink(),
      splitLink({
        condition: (op) => op.type === 'subscription',
        // Subscriptions (events.onEvent) over SSE: an EventSource that sends the Authorization header
        // (the `eventsource` package takes a fetch); on reconnection the link sends the last event id.
        true: httpSubscriptionLink({
          url: `${base}/trpc`,
          EventSource,
          eventSourceOptions: {
            fetch: (input, init) =>
              plainFetch(input, { ...init, headers: { ...init.headers, authorization } }),
          },
        }),
        false: httpLink({
          url: `${base}/trpc`,
          headers: ({ op }) => ({ authorization, ...idempotencyHeaders(op) }),
          fetch: (url, init) => send(new Request(String(url), init as RequestInit)),
        }),
      }),
    ],
  });
  const rest = createClient<paths>({
    baseUrl: base,
    headers: { authorization },
    fetch: send,
  });
  const waitFor = <T extends { id: string; status: string }>(
    kind: WaitKind,
    id: string,
    waitOptions: WaitOptions = {},
  ): Promise<T> => waitForFinal<T>({ trpc, base, authorization, fetch: plainFetch }, kind, id, waitOptions);
  return { trpc, rest, waitFor };
}

/** What `waitFor` waits for: a resource that a 202 answered for, by the path it is read at and its events. */
export type WaitKind = 'payment' | 'refund' | 'export';

/** The event types `events.onEvent` takes (its input's array form), read from the router's own input. */
type EventType = Exclude<
  NonNullable<NonNullable<Exclude<inferRouterInputs<AppRouter>['events']['onEvent'], void>>['types']>,
  string
>[number];

const WAIT_KINDS: Record<WaitKind, { path: (id: string) => string; types: EventType[] }> = {
  payment: {
    path: (id) => `/api/v1/payments/${encodeURIComponent(id)}`,
    types: ['payment.succeeded', 'payment.failed'],
  },
  refund: {
    path: (id) => `/api/v1/refunds/${encodeURIComponent(id)}`,
    types: ['refund.succeeded', 'refund.failed'],
  },
  export: {
    path: (id) => `/api/v1/exports/${encodeURIComponent(id)}`,
    types: ['export.succeeded', 'export.failed'],
  },
};

export interface WaitOptions {
  /** Gives up (rejects with WaitTimeoutError) after this long; default 120000 ms. */
  timeoutMs?: number;
  /** Polls GET instead when the subscription has not started within this long; default 3000 ms. */
  connectTimeoutMs?: number;
  /** Interval of the GET polling fallback; default 1000 ms. */
  pollMs?: number;
  signal?: AbortSignal;
  /** Told when the subscription has started and the resource, read after that, was not final yet. */
  onSubscribed?: () => void;
  /** Told when the wait falls back to polling (the subscription could not connect), for logs and tests. */
  onFallback?: (why: string) => void;
}

/** `waitFor`'s read of the resource was refused (a 4xx other than 429: not found, not yours, no token). */
export class ReadRefusedError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ReadRefusedError';
  }
}

/** `waitFor` gave up: the resource was still PROCESSING after `timeoutMs` (poll `location` later). */
export class WaitTimeoutError extends Error {
  constructor(readonly location: string) {
    super(`still processing after the wait; poll ${location}`);
    this.name = 'WaitTimeoutError';
  }
}

/**
 * Resolves with the resource's final transfer object (status no longer PROCESSING) once it is final:
 * subscribes to events.onEvent for the kind's event types, then, once the stream has started (the
 * server fixed its starting position before that), reads the resource once, so a change made before
 * the subscription is not missed; resolves on the resource's event. When the subscription cannot
 * connect (refused, an error, not started in time) it polls GET instead, until final.
 */
function waitForFinal<T extends { id: string; status: string }>(
  deps: {
    trpc: ReturnType<typeof createTRPCClient<AppRouter>>;
    base: string;
    authorization: string;
    fetch: typeof fetch;
  },
  kind: WaitKind,
  id: string,
  options: WaitOptions,
): Promise<T> {
  const spec = WAIT_KINDS[kind];
  const location = spec.path(id);
  // The resource if final, undefined if still PROCESSING. Throws ReadRefusedError for a 4xx (but
  // 429): no later read can do better. Any other failure (a network error, 429, a 5xx such as a
  // database outage's 503) is transient: the caller reads again.
  const read = async (): Promise<T | undefined> => {
    const res = await deps.fetch(`${deps.base}${location}`, {
      headers: { authorization: deps.authorization },
    });
    const body = (await res.json().catch(() => undefined)) as { data?: T } | undefined;
    if (res.status >= 400 && res.status < 500 && res.status !== 429) {
      throw new ReadRefusedError(`GET ${location} answered ${res.status}`);
    }
    if (!res.ok) throw new Error(`GET ${location} answered ${res.status}`);
    const data = body?.data;
    return data && data.status !== 'PROCESSING' ? data : undefined;
  };
  return new Promise<T>((resolve, reject) => {
    let settled = false;
    let polling = false;
    const timers: ReturnType<typeof setTimeout>[] = [];
    const settle = (err: unknown, value?: T) => {
      if (settled) return;
      settled = true;
      for (const t of timers) clearTimeout(t);
      subscription.unsubscribe();
      options.signal?.removeEventListener('abort', onAbort);
      if (err) reject(err);
      else resolve(value as T);
    };
    // The one read after the subscription started: a transient failure of it must not leave the
    // wait to an event that may have been written before the subscription (a payment final already):
    // it polls instead, the subscription still open.
    const check = () =>
      read().then(
        (final) => (final ? settle(undefined, final) : options.onSubscribed?.()),
        (err: unknown) =>
          err instanceof ReadRefusedError
            ? settle(err)
            : fallBack(`reading ${location} failed: ${(err as Error)?.message ?? String(err)}`),
      );
    const fallBack = (why: string) => {
      if (polling || settled) return;
      polling = true;
      options.onFallback?.(why);
      const tick = async () => {
        // A transient failure (the service unreachable, a 503) is tried again at the next tick.
        await read()
          .then((final) => final && settle(undefined, final))
          .catch((err: unknown) => err instanceof ReadRefusedError && settle(err));
        if (!settled) timers.push(setTimeout(tick, options.pollMs ?? 1000));
      };
      void tick();
    };
    const onAbort = () => settle(options.signal?.reason ?? new Error('aborted'));
    if (options.signal?.aborted) return onAbort();
    options.signal?.addEventListener('abort', onAbort, { once: true });
    timers.push(setTimeout(() => settle(new WaitTimeoutError(location)), options.timeoutMs ?? 120000));
    const connectTimer = setTimeout(
      () => fallBack('the subscription did not start in time'),
      options.connectTimeoutMs ?? 3000,
    );
    timers.push(connectTimer);
    const subscription = deps.trpc.events.onEvent.subscribe(
      { types: spec.types },
      {
        onStarted: () => {
          clearTimeout(connectTimer);
          void check();
        },
        onData: (tracked) => {
          const data = tracked.data.data as T | undefined;
          if (data?.id === id && data.status !== 'PROCESSING') settle(undefined, data);
        },
        onError: (err) => fallBack(`the subscription failed: ${err.message}`),
        onConnectionStateChange: (state) => {
          if (state.state === 'connecting' && state.error)
            fallBack(`the subscription cannot connect: ${state.error.message}`);
        },
      },
    );
  });
}

export interface ExportWaitOptions {
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
  options: ExportWaitOptions = {},
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

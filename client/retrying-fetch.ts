import { randomUUID } from 'node:crypto';

/**
 * The client's half of the idempotency protocol (CONTRACT section 5), as a `fetch` both typed
 * clients use: one key per logical call (the caller's, or one made here once), sent on every retry;
 * a network error, a time-out, 503, 429 (or a proxy's 502/504) is retried with the same key after
 * `Retry-After` (seconds or an HTTP-date; jittered, never sooner) or a capped, jittered exponential
 * back-off without one, until the caller's deadline; a 202 (over tRPC: a result carrying the
 * processing marker) is followed by sending the call again with the same key after `Retry-After`,
 * until the answer is final: the service answers it with the first answer, replayed (a 202 that is
 * itself replayed, `Idempotent-Replayed: true`, is such a stored answer: an export's task id). A wait that
 * would pass the deadline is cut short for one last attempt; then the call ends as
 * StillProcessingError (key, Location) when the service said it was processing, else as
 * RetriesExhaustedError. The caller's abort signal ends the call at once. No other 4xx is ever
 * retried, and no second key is ever made for a call.
 */

export interface RetryOptions {
  /** Total time a call may take, retries and waits included (default 30 s). */
  deadlineMs?: number;
  /** First back-off without Retry-After (default 200 ms), doubled each time up to maxDelayMs (5 s). */
  baseDelayMs?: number;
  maxDelayMs?: number;
  /** Time-out of one attempt (default 10 s); a time-out is retried like a network error. */
  attemptTimeoutMs?: number;
  /** Told of every attempt's outcome (logging, metrics, tests): its status, or 0 for no answer. */
  onAttempt?: (attempt: { key: string | null; status: number; processing: boolean }) => void;
}

/** The deadline passed while the request was still processing: resume later with this key. */
export class StillProcessingError extends Error {
  constructor(
    readonly idempotencyKey: string,
    readonly location: string | null,
  ) {
    super(
      `still processing after the deadline; resume with Idempotency-Key ${idempotencyKey}${location ? ` or poll ${location}` : ''}`,
    );
    this.name = 'StillProcessingError';
  }
}

/** The deadline passed while the service kept answering 503/429 or could not be reached. */
export class RetriesExhaustedError extends Error {
  constructor(
    readonly idempotencyKey: string | null,
    readonly lastStatus: number | null,
    override readonly cause?: unknown,
    /** The business code of the last answer's envelope (e.g. 503, 42901), when it had one. */
    readonly lastCode: number | null = null,
  ) {
    super(`no final answer before the deadline (last: ${lastStatus ?? 'no answer'})`);
    this.name = 'RetriesExhaustedError';
  }
}

const MUTATING = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);
/**
 * Retried with the same key: the service's "try again" answers (503, 429) and a proxy's word that the
 * instance behind it did not answer (502, 504: the same as a network error; the key makes it safe).
 */
const RETRYABLE = new Set([429, 502, 503, 504]);
/** Kept back for the last attempt when a wait would run into the deadline. */
const LAST_ATTEMPT_MS = 1000;

/** A wait that ends early, with the caller's reason, when the caller aborts. */
function sleep(ms: number, signal?: AbortSignal | null): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/** Retry-After in ms: delta-seconds (what the service sends) or an HTTP-date (RFC 9110 10.2.3). */
export function retryAfterMs(value: string | null, now = Date.now()): number | undefined {
  if (value === null) return undefined;
  const text = value.trim();
  if (/^\d+$/.test(text)) return Number(text) * 1000;
  // An HTTP-date names its day and month ("Tue, 24 Nov 2026 12:00:05 GMT"); a bare "-1" is no date.
  const date = /^[A-Za-z]{3}, /.test(text) ? Date.parse(text) : Number.NaN;
  return Number.isNaN(date) ? undefined : Math.max(0, date - now);
}

/**
 * How long to wait before the next attempt: the server's Retry-After when it gave one (never sooner,
 * at least `floorMs`, and up to a fifth later so that clients told the same thing do not come back in
 * lockstep), else a capped exponential back-off with full jitter in its upper half.
 */
export function nextDelayMs(
  attempt: number,
  advisedMs: number | undefined,
  opts: { baseDelayMs: number; maxDelayMs: number },
  random: () => number = Math.random,
): number {
  if (advisedMs !== undefined) {
    const told = Math.max(advisedMs, opts.baseDelayMs);
    return Math.round(told * (1 + random() / 5));
  }
  const backoff = Math.min(opts.maxDelayMs, opts.baseDelayMs * 2 ** attempt);
  return Math.round(backoff * (0.5 + random() / 2));
}

/** A tRPC success that is the service's "still processing" marker (tRPC has no 202). */
async function trpcProcessing(url: string, res: Response): Promise<boolean> {
  if (res.status !== 200 || !new URL(url).pathname.includes('/trpc/')) return false;
  try {
    const body = (await res.clone().json()) as {
      result?: { data?: { data?: { status?: string; resourceId?: unknown } } };
    };
    const data = body.result?.data?.data;
    return data?.status === 'PROCESSING' && data !== undefined && 'resourceId' in data;
  } catch {
    return false;
  }
}

/** The envelope's business code of an error answer (REST `code`, tRPC `error.data.businessCode`). */
async function businessCode(res: Response): Promise<number | null> {
  try {
    const body = (await res.json()) as { code?: unknown; error?: { data?: { businessCode?: unknown } } };
    const code = body.code ?? body.error?.data?.businessCode;
    return typeof code === 'number' ? code : null;
  } catch {
    return null;
  }
}

export function retryingFetch(
  options: RetryOptions = {},
  base: typeof fetch = fetch,
): (input: Request) => Promise<Response> {
  const deadlineMs = options.deadlineMs ?? 30000;
  const delays = { baseDelayMs: options.baseDelayMs ?? 200, maxDelayMs: options.maxDelayMs ?? 5000 };
  const attemptTimeout = options.attemptTimeoutMs ?? 10000;

  return async (input: Request): Promise<Response> => {
    const deadline = Date.now() + deadlineMs;
    // The caller's own signal (tRPC's and openapi-fetch's `signal`): aborts the attempt and any wait.
    const callerSignal = input.signal;
    const mutating = MUTATING.has(input.method.toUpperCase());
    const headers = new Headers(input.headers);
    // One key per logical call: the caller's if it set one, else made here once, for every retry.
    let key: string | null = headers.get('idempotency-key');
    if (mutating && !key) {
      key = randomUUID();
      headers.set('idempotency-key', key);
    }
    const body = input.body === null ? undefined : await input.arrayBuffer();
    let lastStatus: number | null = null;
    let lastCode: number | null = null;
    let lastError: unknown;
    // Once an attempt was answered "still processing", the call ends as such if the deadline comes.
    let processingSeen: { location: string | null } | undefined;
    // Set when a wait was cut short by the deadline: the attempt after it is the call's last.
    let lastAttemptMade = false;
    for (let attempt = 0; ; attempt++) {
      let res: Response | undefined;
      const left = deadline - Date.now();
      try {
        const timeout = AbortSignal.timeout(Math.max(1, Math.min(attemptTimeout, left)));
        res = await base(input.url, {
          method: input.method,
          headers,
          body,
          signal: AbortSignal.any([timeout, callerSignal]),
        });
      } catch (err) {
        if (callerSignal.aborted) throw callerSignal.reason;
        lastError = err; // refused, reset, time-out: retried with the same key
      }
      // A 202 marked as replayed is a stored answer (an accepted export's task id): final, not in flight.
      const stored = res?.headers.get('idempotent-replayed') === 'true';
      const processing =
        res && !stored ? res.status === 202 || (await trpcProcessing(input.url, res)) : false;
      options.onAttempt?.({ key, status: res?.status ?? 0, processing });
      let advised: number | undefined;
      if (res) {
        lastStatus = res.status;
        advised = retryAfterMs(res.headers.get('retry-after'));
        if (processing) {
          // Sent again with the same key: the service waits for the running attempt (or takes it
          // over once its lease ended) and answers with the final answer itself, replayed.
          processingSeen = { location: res.headers.get('location') };
          lastCode = 202;
          await res.arrayBuffer();
        } else if (RETRYABLE.has(res.status)) {
          lastCode = await businessCode(res);
        } else {
          return res; // final: a success, or a 4xx other than 429 (never retried), or a 500
        }
      }
      let wait = nextDelayMs(attempt, advised, delays);
      // Never past the deadline: a wait that would run into it is cut short so that one last
      // attempt still fits, and that attempt is the last; with no room left for one, or after the
      // last, the call ends here.
      const room = deadline - Date.now() - Math.min(LAST_ATTEMPT_MS, attemptTimeout);
      if (lastAttemptMade || room < 0) {
        if (processingSeen) throw new StillProcessingError(key ?? '', processingSeen.location);
        throw new RetriesExhaustedError(key, lastStatus, lastError, lastCode);
      }
      if (wait > room) {
        wait = room;
        lastAttemptMade = true;
      }
      await sleep(wait, callerSignal);
    }
  };
}

import { randomUUID } from 'node:crypto';

/**
 * The client's half of the idempotency protocol (CONTRACT section 5), as a `fetch` both typed
 * clients use: one key per logical call (the caller's, or one made here once), sent on every retry;
 * a network error, 503 or 429 is retried with the same key after `Retry-After` (or a capped,
 * jittered exponential back-off without one) until the caller's deadline; a 202 (over tRPC: a result
 * carrying the processing marker) is followed by sending the call again with the same key after
 * `Retry-After`, until the answer is final: the service answers it with the first answer, replayed. No other 4xx is ever retried, and no second key is ever made for a call.
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
    super(`still processing after the deadline; resume with Idempotency-Key ${idempotencyKey}${location ? ` or poll ${location}` : ''}`);
    this.name = 'StillProcessingError';
  }
}

/** The deadline passed while the service kept answering 503/429 or could not be reached. */
export class RetriesExhaustedError extends Error {
  constructor(
    readonly idempotencyKey: string | null,
    readonly lastStatus: number | null,
    override readonly cause?: unknown,
  ) {
    super(`no final answer before the deadline (last: ${lastStatus ?? 'no answer'})`);
    this.name = 'RetriesExhaustedError';
  }
}

const MUTATING = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Seconds of a Retry-After header (delta-seconds only, as the service sends), in ms. */
function retryAfterMs(res: Response): number | undefined {
  const value = res.headers.get('retry-after');
  return value && /^\d+$/.test(value) ? Number(value) * 1000 : undefined;
}

/** A tRPC success that is the service's "still processing" marker (tRPC has no 202). */
async function trpcProcessing(res: Response): Promise<boolean> {
  if (res.status !== 200 || !new URL(res.url || 'http://x/').pathname.includes('/trpc/')) return false;
  try {
    const body = (await res.clone().json()) as { result?: { data?: { data?: { status?: string; resourceId?: unknown } } } };
    const data = body.result?.data?.data;
    return data?.status === 'PROCESSING' && data !== undefined && 'resourceId' in data;
  } catch {
    return false;
  }
}

export function retryingFetch(options: RetryOptions = {}, base: typeof fetch = fetch): (input: Request) => Promise<Response> {
  const deadlineMs = options.deadlineMs ?? 30000;
  const baseDelay = options.baseDelayMs ?? 200;
  const maxDelay = options.maxDelayMs ?? 5000;
  const attemptTimeout = options.attemptTimeoutMs ?? 10000;

  return async (input: Request): Promise<Response> => {
    const deadline = Date.now() + deadlineMs;
    const mutating = MUTATING.has(input.method.toUpperCase());
    const headers = new Headers(input.headers);
    // One key per logical call: the caller's if it set one, else made here once, for every retry.
    let key: string | null = headers.get('idempotency-key');
    if (mutating && !key) {
      key = randomUUID();
      headers.set('idempotency-key', key);
    }
    const body = input.body === null ? undefined : await input.arrayBuffer();
    const request = { url: input.url, method: input.method, headers, body };
    let lastStatus: number | null = null;
    let lastError: unknown;
    for (let attempt = 0; ; attempt++) {
      let res: Response | undefined;
      try {
        res = await base(request.url, {
          method: request.method,
          headers: request.headers,
          body: request.body,
          signal: AbortSignal.timeout(Math.max(1, Math.min(attemptTimeout, deadline - Date.now()))),
        });
      } catch (err) {
        lastError = err; // refused, reset, time-out: retried with the same key
      }
      const backoff = Math.min(maxDelay, baseDelay * 2 ** attempt) * (0.5 + Math.random() / 2);
      let wait = backoff;
      const processing = res ? res.status === 202 || (await trpcProcessing(res)) : false;
      options.onAttempt?.({ key, status: res?.status ?? 0, processing });
      if (res) {
        lastStatus = res.status;
        if (res.status === 503 || res.status === 429) {
          wait = retryAfterMs(res) ?? backoff;
          await res.arrayBuffer();
        } else if (processing) {
          const location = res.headers.get('location');
          wait = retryAfterMs(res) ?? backoff;
          if (Date.now() + wait > deadline) throw new StillProcessingError(key ?? '', location);
          await res.arrayBuffer();
          // Sent again with the same key: the service waits for the running attempt (or takes it
          // over once its lease ended) and answers with the final answer itself, replayed.
          await sleep(wait);
          continue;
        } else {
          return res; // final: a success, or a 4xx other than 429 (never retried)
        }
      }
      if (Date.now() + wait > deadline) throw new RetriesExhaustedError(key, lastStatus, lastError);
      await sleep(wait);
    }
  };
}

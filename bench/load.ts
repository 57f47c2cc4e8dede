import autocannon from 'autocannon';

export interface LoadRequest {
  method: 'POST' | 'GET';
  path: string;
  headers: Record<string, string>;
  body?: string;
}

export interface LoadOptions {
  url: string;
  connections: number;
  /** Seconds; ignored when `amount` is set. */
  duration?: number;
  /** Exact number of requests (autocannon gives each connection amount / connections). */
  amount?: number;
  /** Builds each request (fresh keys, rotating tokens). Called once per request sent. */
  next: () => LoadRequest;
  /** Sees every answer's status and headers (slower: autocannon keeps the body for it). */
  inspect?: (status: number, headers: Record<string, string | string[]>) => void;
  /** Stops the load early when it settles. */
  stopWhen?: Promise<unknown>;
  /** The HTTP status of a final answer (default 201; a tRPC mutation answers 200). */
  final?: number;
}

export interface LoadResult {
  durationSec: number;
  responses: number;
  /** Final answers: 201 only (or `final`). */
  created: number;
  /** req/s counting final answers only. */
  rps: number;
  /** The status counted as final when it is not 201. */
  final?: number;
  p50: number;
  p90: number;
  p99: number;
  max: number;
  statuses: Record<string, number>;
  /** Connection errors and time-outs (no answer at all). */
  errors: number;
  /** Every latency, ascending (not enumerable: kept out of the JSON results). */
  samples: Float64Array;
}

/** Percentile of an ascending array (nearest rank). */
export function percentile(sorted: Float64Array | number[], q: number): number {
  if (sorted.length === 0) return Number.NaN;
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1));
  return sorted[i];
}

/**
 * One autocannon run in this (the benchmark's) process against a server in another process, on
 * loopback. Latencies come from autocannon's per-response timings (hrtime); throughput counts 201s.
 */
export async function load(opts: LoadOptions): Promise<LoadResult> {
  let latencies = new Float64Array(65536);
  let n = 0;
  const statuses: Record<string, number> = {};
  let errors = 0;
  let created = 0;
  const final = opts.final ?? 201;
  const instance = autocannon({
    url: opts.url,
    connections: opts.connections,
    ...(opts.amount ? { amount: opts.amount } : { duration: opts.duration }),
    timeout: 30,
    skipAggregateResult: true,
    requests: [
      {
        setupRequest: (req) => {
          const r = opts.next();
          req.method = r.method;
          req.path = r.path;
          req.headers = { ...r.headers, ...(r.body ? { 'content-type': 'application/json' } : {}) };
          req.body = r.body ?? '';
          return req;
        },
        onResponse: opts.inspect
          ? (status, _body, _ctx, headers) =>
              opts.inspect?.(
                status,
                Object.fromEntries(Object.entries(headers).map(([k, v]) => [k.toLowerCase(), v])),
              )
          : undefined,
      },
    ],
  });
  instance.on('response', (_client: unknown, status: number, _bytes: number, ms: number) => {
    if (n === latencies.length) {
      const bigger = new Float64Array(latencies.length * 2);
      bigger.set(latencies);
      latencies = bigger;
    }
    latencies[n++] = ms;
    statuses[status] = (statuses[status] ?? 0) + 1;
    if (status === final) created += 1;
  });
  instance.on('reqError', () => {
    errors += 1;
  });
  opts.stopWhen?.then(
    () => instance.stop(),
    () => instance.stop(),
  );
  const result = await instance;
  const sorted = latencies.slice(0, n).sort();
  const durationSec = result.duration;
  const out: Omit<LoadResult, 'samples'> = {
    durationSec,
    responses: n,
    created,
    rps: durationSec > 0 ? created / durationSec : 0,
    p50: percentile(sorted, 0.5),
    p90: percentile(sorted, 0.9),
    p99: percentile(sorted, 0.99),
    max: n > 0 ? sorted[n - 1] : Number.NaN,
    statuses,
    errors,
    ...(final === 201 ? {} : { final }),
  };
  return Object.defineProperty(out, 'samples', { value: sorted, enumerable: false }) as LoadResult;
}

/** Non-final (non-201) answers and transport errors, e.g. "202×3 500×1 err×2" ("" when none). */
export function nonFinal(r: Pick<LoadResult, 'statuses' | 'errors' | 'final'>): string {
  const parts = Object.entries(r.statuses)
    .filter(([s]) => s !== String(r.final ?? 201))
    .map(([s, c]) => `${s}×${c}`);
  if (r.errors > 0) parts.push(`err×${r.errors}`);
  return parts.join(' ');
}

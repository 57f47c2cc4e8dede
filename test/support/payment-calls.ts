import { setTimeout as sleep } from 'node:timers/promises';
import type { GatewayClient } from '../../gateway/types.js';
import { type HttpResult, http } from './http.js';
import { idempotencyKey } from './tokens.js';
import { trpcClient } from './trpc-client.js';

export interface PaymentRequest {
  merchantOrderNo: string;
  amount: string | number;
  currency?: string;
}

/** POST /api/v1/payments with an Idempotency-Key. */
export function pay(
  baseUrl: string,
  auth: Record<string, string>,
  key: string,
  body: PaymentRequest,
  path = '/api/v1/payments',
): Promise<HttpResult> {
  return http('POST', path, { baseUrl, headers: { ...auth, 'Idempotency-Key': key }, body });
}

/**
 * A payment answered 503 because the gateway (`gateway`, the simulator behind the instance) failed
 * with 5xx: nothing charged, the payment resumable (CONTRACT section 3). Its key; throws on any other
 * answer.
 */
export async function payNotCharged(
  baseUrl: string,
  gateway: Pick<GatewayClient, 'setFaults'>,
  auth: Record<string, string>,
  body: PaymentRequest,
): Promise<string> {
  await gateway.setFaults({ errorRate: 1 });
  const key = idempotencyKey();
  const res = await pay(baseUrl, auth, key, body);
  await gateway.setFaults({});
  if (res.status !== 503) throw new Error(`a payment while the gateway fails: ${res.status} ${res.text}`);
  return key;
}

/** An HTTP answer, or status 0 when the connection failed (a killed instance). */
export async function payOrFail(
  baseUrl: string,
  auth: Record<string, string>,
  key: string,
  body: PaymentRequest,
): Promise<HttpResult> {
  try {
    return await pay(baseUrl, auth, key, body);
  } catch (err) {
    return { status: 0, headers: new Headers(), body: undefined, text: String(err) };
  }
}

export interface RetryOutcome {
  final: HttpResult;
  /** Every status seen, in order (0 = no answer). */
  statuses: number[];
}

/**
 * A client that retries with the same key, as the contract tells it to, until the answer is final
 * (any status not in `retryable`). Bounded: fails loudly instead of hanging the suite.
 */
export function payUntilFinal(
  baseUrls: string | string[],
  auth: Record<string, string>,
  key: string,
  body: PaymentRequest,
  opts: RetryOptions = {},
): Promise<RetryOutcome> {
  const urls = Array.isArray(baseUrls) ? baseUrls : [baseUrls];
  return untilFinal(
    (attempt) => payOrFail(urls[attempt % urls.length], auth, key, body),
    `payment ${body.merchantOrderNo}`,
    opts,
  );
}

export interface RetryOptions {
  retryable?: number[];
  deadlineMs?: number;
  pauseMs?: number;
}

/** `send` (the same request, with its key) again until its answer is final, as payUntilFinal. */
export async function untilFinal(
  send: (attempt: number) => Promise<HttpResult>,
  what: string,
  opts: RetryOptions = {},
): Promise<RetryOutcome> {
  const retryable = new Set(opts.retryable ?? [202, 503]);
  const deadline = Date.now() + (opts.deadlineMs ?? 20000);
  const statuses: number[] = [];
  for (let attempt = 0; ; attempt++) {
    const res = await send(attempt);
    statuses.push(res.status);
    if (!retryable.has(res.status)) return { final: res, statuses };
    if (Date.now() > deadline)
      throw new Error(`${what} never became final: ${statuses.join(',')} ${res.text}`);
    await sleep(opts.pauseMs ?? 250);
  }
}

/**
 * Environment of a real instance for fault tests: short leases and time-outs, from configuration only
 * (the gateway time-out stays below the lease, as the configuration demands).
 */
export function shortLeaseEnv(
  databaseUrl: string,
  gatewayUrl: string,
  overrides: Record<string, string> = {},
): Record<string, string> {
  return {
    DATABASE_URL: databaseUrl,
    PAYMENT_GATEWAY_URL: gatewayUrl,
    IDEMPOTENCY_LEASE_MS: '1500',
    GATEWAY_TIMEOUT_MS: '500',
    RECOVERER_INTERVAL_MS: '200',
    IDEMPOTENCY_WAIT_MS: '300',
    ...overrides,
  };
}

export { trpcClient };

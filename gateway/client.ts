// Client for the payment gateway (CONTRACT.md section 9): every answer classified into what it proves
// about the effect (done, declined, unknown, certainly not done); the transport is http-transport.ts.
import type { z } from 'zod';
import { createHttpTransport, type Sent } from './http-transport.js';
import type {
  BusinessRefund,
  Charge,
  ChargeOutcome,
  Faults,
  GatewayClient,
  Ledger,
  NotDoneReason,
  QueryOutcome,
  Refund,
  RefundOutcome,
  RefundQueryOutcome,
  RefundRequest,
  UnknownReason,
} from './types.js';
import { businessRefundSchema, chargeSchema, faultsSchema, ledgerSchema, refundSchema } from './wire.js';

export type {
  ChargeOutcome,
  GatewayClient,
  QueryOutcome,
  RefundOutcome,
  RefundQueryOutcome,
} from './types.js';

/** Thrown for answers that only a bug can cause (a 4xx), and by the compensation refund, ledger and setFaults on any failure. */
export class GatewayError extends Error {
  constructor(
    message: string,
    readonly status?: number,
  ) {
    super(message);
    this.name = 'GatewayError';
  }
}

/**
 * The gateway's ledger, or undefined when it answered that it offers none (4xx). No answer at all
 * (refused, time-out) throws: nothing could be verified.
 */
export async function ledgerIfOffered(gateway: Pick<GatewayClient, 'ledger'>): Promise<Ledger | undefined> {
  try {
    return await gateway.ledger();
  } catch (err) {
    if (err instanceof GatewayError && err.status !== undefined && err.status < 500) return undefined;
    throw err;
  }
}

/** An effect's POST (a charge, a business refund), classified once for all of them. */
type Attempt<T> =
  | { kind: 'answered'; record: T }
  | { kind: 'unknown'; reason: UnknownReason }
  | { kind: 'not-done'; reason: NotDoneReason };

/** An effect's GET by its idempotency key. */
type Lookup<T> = { kind: 'found'; record: T } | { kind: 'none' } | { kind: 'unavailable' };

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/** The record as the contract shapes it, or undefined: a half-formed 200 must never pass for one. */
function toRecord<T>(schema: z.ZodType<T>, sent: { status: number; text: string }): T | undefined {
  if (sent.status !== 200) return undefined;
  const parsed = schema.safeParse(parseJson(sent.text));
  return parsed.success ? parsed.data : undefined;
}

export function createGatewayClient(opts: { baseUrl: string; timeoutMs: number }): GatewayClient {
  const { send, close } = createHttpTransport(opts);

  /**
   * POST of an effect under `Idempotency-Key: key`. `isOurs` says whether a well-formed answer is the
   * one for this key: a 200 for another key is as untrustworthy as garbage.
   */
  async function attempt<T>(
    what: string,
    path: string,
    body: unknown,
    key: string,
    schema: z.ZodType<T>,
    isOurs: (record: T) => boolean,
    signal?: AbortSignal,
  ): Promise<Attempt<T>> {
    const sent = await send('POST', path, body, { 'idempotency-key': key }, signal);
    // Only a refusal (or an abort before the request existed) proves nothing was sent; a time-out,
    // reset or abort after connecting may have charged or refunded.
    if (!sent.ok) {
      if (sent.failure === 'refused') return { kind: 'not-done', reason: 'refused' };
      if (sent.failure === 'not-sent') return { kind: 'not-done', reason: 'aborted' };
      return { kind: 'unknown', reason: sent.failure };
    }
    // By the gateway contract a 5xx means nothing was done.
    if (sent.status >= 500 && sent.status <= 599) return { kind: 'not-done', reason: 'server-error' };
    if (sent.status >= 400 && sent.status <= 499)
      throw new GatewayError(`gateway rejected the ${what} request: HTTP ${sent.status}`, sent.status);
    const record = toRecord(schema, sent);
    if (record === undefined || !isOurs(record)) return { kind: 'unknown', reason: 'bad-response' };
    return { kind: 'answered', record };
  }

  /** GET of an effect by its key: 404 is "none was made"; anything else ill-formed settles nothing. */
  async function lookup<T>(
    what: string,
    path: string,
    schema: z.ZodType<T>,
    isOurs: (record: T) => boolean,
    signal?: AbortSignal,
  ): Promise<Lookup<T>> {
    const sent = await send('GET', path, undefined, {}, signal);
    if (!sent.ok) return { kind: 'unavailable' };
    if (sent.status === 404) return { kind: 'none' };
    if (sent.status >= 400 && sent.status <= 499)
      throw new GatewayError(`gateway rejected the ${what} query: HTTP ${sent.status}`, sent.status);
    const record = toRecord(schema, sent);
    if (record === undefined || !isOurs(record)) return { kind: 'unavailable' };
    return { kind: 'found', record };
  }

  /** For the calls whose failure has no safe interpretation: the caller gets an error and retries. */
  async function expectOk(what: string, sent: Sent): Promise<unknown> {
    if (!sent.ok) throw new GatewayError(`gateway ${what} failed: ${sent.failure}`);
    if (sent.status !== 200)
      throw new GatewayError(`gateway ${what} failed: HTTP ${sent.status}`, sent.status);
    const body = parseJson(sent.text);
    if (body === undefined) throw new GatewayError(`gateway ${what} failed: unparsable answer`, sent.status);
    return body;
  }

  /** An empty key would hit "/charges/" or "/refunds/", whose 404 would read as "none was made". */
  const keyPath = (collection: 'charges' | 'refunds', name: string, key: string) => {
    if (key === '') throw new GatewayError(`${name} must not be empty`);
    return `/${collection}/${encodeURIComponent(key)}`;
  };

  async function businessRefund(req: RefundRequest, signal?: AbortSignal): Promise<RefundOutcome> {
    const { refundNo, paymentNo, chargeId, amount, currency } = req;
    const ours = (r: BusinessRefund) => r.refundNo === refundNo;
    const sent = { refundNo, paymentNo, chargeId, amount, currency };
    const a = await attempt('refund', '/refunds', sent, refundNo, businessRefundSchema, ours, signal);
    if (a.kind === 'not-done') return { kind: 'not-refunded', reason: a.reason };
    if (a.kind === 'unknown') return a;
    return { kind: a.record.status === 'SUCCEEDED' ? 'refunded' : 'declined', refund: a.record };
  }

  async function compensate(paymentNo: string, chargeId: string): Promise<Refund> {
    const body = refundSchema.safeParse(
      await expectOk('refund', await send('POST', '/refunds', { paymentNo, chargeId })),
    );
    if (!body.success || body.data.chargeId !== chargeId)
      throw new GatewayError('gateway refund failed: unexpected answer');
    return { paymentNo, chargeId, refundId: body.data.refundId };
  }

  function refund(req: RefundRequest, signal?: AbortSignal): Promise<RefundOutcome>;
  function refund(paymentNo: string, chargeId: string): Promise<Refund>;
  function refund(
    first: RefundRequest | string,
    second?: AbortSignal | string,
  ): Promise<RefundOutcome | Refund> {
    if (typeof first === 'string') {
      if (typeof second !== 'string') throw new TypeError('refund(paymentNo, chargeId) needs a chargeId');
      return compensate(first, second);
    }
    return businessRefund(first, typeof second === 'string' ? undefined : second);
  }

  return {
    async charge(req, signal): Promise<ChargeOutcome> {
      const { paymentNo, amount, currency } = req;
      const ours = (c: Charge) => c.paymentNo === paymentNo;
      const body = { paymentNo, amount, currency };
      const a = await attempt('charge', '/charges', body, paymentNo, chargeSchema, ours, signal);
      if (a.kind === 'not-done') return { kind: 'not-charged', reason: a.reason };
      if (a.kind === 'unknown') return a;
      return { kind: a.record.status === 'SUCCEEDED' ? 'charged' : 'declined', charge: a.record };
    },

    async query(paymentNo, signal): Promise<QueryOutcome> {
      const path = keyPath('charges', 'paymentNo', paymentNo);
      const l = await lookup('charge', path, chargeSchema, (c) => c.paymentNo === paymentNo, signal);
      return l.kind === 'found' ? { kind: 'found', charge: l.record } : l;
    },

    refund,

    async queryRefund(refundNo, signal): Promise<RefundQueryOutcome> {
      const path = keyPath('refunds', 'refundNo', refundNo);
      const l = await lookup('refund', path, businessRefundSchema, (r) => r.refundNo === refundNo, signal);
      return l.kind === 'found' ? { kind: 'found', refund: l.record } : l;
    },

    async ledger(): Promise<Ledger> {
      const body = ledgerSchema.safeParse(await expectOk('ledger', await send('GET', '/ledger')));
      if (!body.success) throw new GatewayError('gateway ledger failed: unexpected answer');
      return body.data;
    },

    async setFaults(faults: Faults): Promise<Faults> {
      const body = faultsSchema.safeParse(await expectOk('setFaults', await send('PUT', '/faults', faults)));
      if (!body.success) throw new GatewayError('gateway setFaults failed: unexpected answer');
      return body.data;
    },

    async close(): Promise<void> {
      close();
    },
  };
}

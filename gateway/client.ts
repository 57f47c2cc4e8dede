// HTTP client for the payment gateway (CONTRACT.md section 9).
//
// Why node:http(s) with an Agent({keepAlive: true}) rather than the global fetch: fetch's pool (undici's
// global dispatcher) is shared by the whole process and cannot be closed without importing undici,
// which is not a dependency; and fetch folds every transport failure into one "fetch failed"
// TypeError, whereas here each failure keeps its own error code, which decides whether a charge may
// have happened (a refused connection sent nothing; a reset after connecting may have charged).
import http from 'node:http';
import https from 'node:https';
import type { Charge, ChargeOutcome, Faults, GatewayClient, Ledger, QueryOutcome, Refund } from './types.js';
import { chargeSchema, faultsSchema, ledgerSchema, refundSchema } from './wire.js';

export type { ChargeOutcome, GatewayClient, QueryOutcome } from './types.js';

/** Thrown for answers that only a bug can cause (a 4xx) and by refund/ledger/setFaults on any failure. */
export class GatewayError extends Error {
  constructor(
    message: string,
    readonly status?: number,
  ) {
    super(message);
    this.name = 'GatewayError';
  }
}

type Sent =
  | { ok: true; status: number; text: string }
  | { ok: false; failure: 'refused' | 'timeout' | 'reset' };

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/** A charge as the contract shapes it, or undefined: a half-formed 200 must never pass for a charge. */
function toCharge(body: unknown): Charge | undefined {
  const parsed = chargeSchema.safeParse(body);
  return parsed.success ? parsed.data : undefined;
}

/** ECONNREFUSED comes only from connect(), so nothing was sent. With several addresses (e.g. "localhost")
 * Node reports an AggregateError; it is a refusal only when every address refused. */
function isRefused(err: unknown): boolean {
  if (err instanceof AggregateError) return err.errors.length > 0 && err.errors.every(isRefused);
  return (err as NodeJS.ErrnoException | null)?.code === 'ECONNREFUSED';
}

export function createGatewayClient(opts: { baseUrl: string; timeoutMs: number }): GatewayClient {
  const base = new URL(opts.baseUrl);
  if (base.protocol !== 'http:' && base.protocol !== 'https:')
    throw new Error('payment gateway URL must be http: or https:');
  if (!Number.isFinite(opts.timeoutMs) || opts.timeoutMs <= 0) throw new Error('timeoutMs must be positive');
  const prefix = base.pathname.replace(/\/+$/, '');
  const transport = base.protocol === 'https:' ? https : http;
  // Idle sockets are closed after 4 s, before the usual 5 s server keep-alive time-out (Node also honours
  // a shorter Keep-Alive hint): reusing a socket the server is closing would turn a sure answer into a
  // reset, i.e. an "unknown" charge. No maxSockets: time spent queued for a socket would count against
  // timeoutMs and end as "unknown" although nothing was sent.
  const agent = new transport.Agent({ keepAlive: true, timeout: 4000 });

  function send(
    method: string,
    path: string,
    body?: unknown,
    headers: http.OutgoingHttpHeaders = {},
  ): Promise<Sent> {
    return new Promise<Sent>((resolve) => {
      let settled = false;
      let timer: NodeJS.Timeout | undefined;
      const finish = (result: Sent) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        resolve(result);
      };
      const payload = body === undefined ? undefined : JSON.stringify(body);
      const url = new URL(base);
      url.pathname = prefix + path;
      const req = transport.request(url, {
        method,
        agent,
        headers: {
          ...headers,
          accept: 'application/json',
          ...(payload === undefined
            ? {}
            : { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) }),
        },
      });
      // One deadline for connect, send and the whole answer, so a gateway that hangs at any stage still
      // yields an outcome within timeoutMs. Destroying the request also drops its socket from the pool.
      timer = setTimeout(() => {
        finish({ ok: false, failure: 'timeout' });
        req.destroy();
      }, opts.timeoutMs);
      req.on('error', (err) => finish({ ok: false, failure: isRefused(err) ? 'refused' : 'reset' }));
      req.on('response', (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () =>
          finish({ ok: true, status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }),
        );
        // The connection dropped in the middle of the answer: the gateway may well have charged.
        res.on('error', () => finish({ ok: false, failure: 'reset' }));
        res.on('close', () => {
          if (!res.complete) finish({ ok: false, failure: 'reset' });
        });
      });
      req.end(payload);
    });
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

  const chargePath = (paymentNo: string) => {
    // An empty paymentNo would hit "/charges/", whose 404 would read as "never charged".
    if (paymentNo === '') throw new GatewayError('paymentNo must not be empty');
    return `/charges/${encodeURIComponent(paymentNo)}`;
  };

  return {
    async charge(req): Promise<ChargeOutcome> {
      const sent = await send(
        'POST',
        '/charges',
        { paymentNo: req.paymentNo, amount: req.amount, currency: req.currency },
        { 'idempotency-key': req.paymentNo },
      );
      // Only a refusal proves nothing was sent; a time-out or reset after connecting may have charged.
      if (!sent.ok)
        return sent.failure === 'refused'
          ? { kind: 'not-charged', reason: 'refused' }
          : { kind: 'unknown', reason: sent.failure };
      // By the gateway contract a 5xx means nothing was charged.
      if (sent.status >= 500 && sent.status <= 599) return { kind: 'not-charged', reason: 'server-error' };
      if (sent.status >= 400 && sent.status <= 499)
        throw new GatewayError(`gateway rejected the charge request: HTTP ${sent.status}`, sent.status);
      const charge = sent.status === 200 ? toCharge(parseJson(sent.text)) : undefined;
      // A 200 for another paymentNo is as untrustworthy as garbage: the charge state stays to be queried.
      if (!charge || charge.paymentNo !== req.paymentNo) return { kind: 'unknown', reason: 'bad-response' };
      return charge.status === 'SUCCEEDED' ? { kind: 'charged', charge } : { kind: 'declined', charge };
    },

    async query(paymentNo): Promise<QueryOutcome> {
      const sent = await send('GET', chargePath(paymentNo));
      if (!sent.ok) return { kind: 'unavailable' };
      if (sent.status === 404) return { kind: 'none' };
      if (sent.status >= 400 && sent.status <= 499)
        throw new GatewayError(`gateway rejected the charge query: HTTP ${sent.status}`, sent.status);
      const charge = sent.status === 200 ? toCharge(parseJson(sent.text)) : undefined;
      // Anything but a well-formed charge for this paymentNo settles nothing.
      if (!charge || charge.paymentNo !== paymentNo) return { kind: 'unavailable' };
      return { kind: 'found', charge };
    },

    async refund(paymentNo, chargeId): Promise<Refund> {
      const body = refundSchema.safeParse(
        await expectOk('refund', await send('POST', '/refunds', { paymentNo, chargeId })),
      );
      if (!body.success || body.data.chargeId !== chargeId)
        throw new GatewayError('gateway refund failed: unexpected answer');
      return { paymentNo, chargeId, refundId: body.data.refundId };
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
      agent.destroy();
    },
  };
}

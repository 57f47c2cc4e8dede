// Payment gateway simulator (CONTRACT.md section 9) with fault injection, on node:http only.
// It keeps no log at all, so no request data (and no secret) can leak from it.
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import type { z } from 'zod';
import type { Charge, Faults, Ledger, Refund } from './types.js';
import { chargeRequestSchema, faultsSchema, firstProblem, refundRequestSchema } from './wire.js';

export interface GatewaySimulator {
  url: string;
  port: number;
  close(): Promise<void>;
}

const MAX_BODY_BYTES = 64 * 1024;

class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

const newId = (prefix: string) => `${prefix}_${randomBytes(12).toString('hex')}`;
const hit = (rate: number | undefined) => rate !== undefined && rate > 0 && Math.random() < rate;

/** A request body checked against its wire schema: 400 with the first problem otherwise. */
function parse<T extends z.ZodType>(schema: T, body: unknown): z.infer<T> {
  const parsed = schema.safeParse(body);
  if (!parsed.success) throw new HttpError(400, firstProblem(parsed.error));
  return parsed.data;
}

async function readJson(req: http.IncomingMessage): Promise<unknown> {
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

function send(
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

export async function startGatewaySimulator(
  opts: { port?: number; host?: string } = {},
): Promise<GatewaySimulator> {
  const host = opts.host ?? '127.0.0.1';
  const ledger: Ledger = { charges: [], refunds: [] };
  const firstCharge = new Map<string, Charge>();
  const refundByChargeId = new Map<string, Refund>();
  let faults: Faults = {};
  // Tracked so that close() can end hung ("timeout after charge") requests and idle keep-alive sockets.
  const sockets = new Set<Socket>();
  const timers = new Set<NodeJS.Timeout>();

  const sleep = (ms: number) =>
    new Promise<void>((resolve) => {
      const timer = setTimeout(() => {
        timers.delete(timer);
        resolve();
      }, ms);
      timers.add(timer);
    });

  async function postCharge(req: http.IncomingMessage, res: http.ServerResponse) {
    const input = parse(chargeRequestSchema, await readJson(req));
    if (req.headers['idempotency-key'] !== input.paymentNo)
      throw new HttpError(400, 'Idempotency-Key header must equal paymentNo');
    // One snapshot per request: a PUT /faults arriving meanwhile must not change this request half-way.
    const f = faults;
    let charge = f.ignoreIdempotencyKey ? undefined : firstCharge.get(input.paymentNo);
    if (charge && (charge.amount !== input.amount || charge.currency !== input.currency))
      throw new HttpError(409, 'Idempotency-Key reused with a different amount or currency');
    if (!charge) {
      // A 500 only where this request would have charged: a replay of an existing charge never gets
      // one, because the contract lets the caller read any 5xx as "nothing was charged".
      if (hit(f.errorRate)) {
        if (f.latencyMs) await sleep(f.latencyMs);
        return send(res, 500, { error: 'simulated gateway error; nothing was charged' });
      }
      charge = { ...input, chargeId: newId('ch'), status: hit(f.declineRate) ? 'DECLINED' : 'SUCCEEDED' };
      // Recorded on arrival, before any delay: a caller that gave up meanwhile finds it by querying.
      ledger.charges.push(charge);
      if (!firstCharge.has(input.paymentNo)) firstCharge.set(input.paymentNo, charge);
    }
    if (f.latencyMs) await sleep(f.latencyMs);
    if (hit(f.timeoutAfterChargeRate)) return; // never answer; close() or the client ends the socket
    if (hit(f.resetAfterChargeRate)) return req.socket.resetAndDestroy();
    send(res, 200, charge);
  }

  async function postRefund(req: http.IncomingMessage, res: http.ServerResponse) {
    const { paymentNo, chargeId } = parse(refundRequestSchema, await readJson(req));
    const charge = ledger.charges.find((c) => c.paymentNo === paymentNo && c.chargeId === chargeId);
    if (!charge) throw new HttpError(404, 'no such charge');
    if (charge.status === 'DECLINED') throw new HttpError(409, 'a declined charge has nothing to refund');
    // Idempotent per chargeId: a caller whose refund timed out retries it without refunding twice.
    let refund = refundByChargeId.get(chargeId);
    if (!refund) {
      refund = { paymentNo, chargeId, refundId: newId('re') };
      ledger.refunds.push(refund);
      refundByChargeId.set(chargeId, refund);
    }
    send(res, 200, refund);
  }

  async function route(req: http.IncomingMessage, res: http.ServerResponse) {
    const path = new URL(req.url ?? '/', 'http://simulator').pathname;
    const method = req.method ?? 'GET';
    const only = (...allowed: string[]) => {
      if (!allowed.includes(method))
        throw Object.assign(new HttpError(405, 'method not allowed'), { allowed: allowed.join(', ') });
    };
    const chargePath = /^\/charges\/([^/]+)$/.exec(path);
    if (path === '/charges') {
      only('POST');
      return postCharge(req, res);
    }
    if (chargePath) {
      only('GET');
      let paymentNo: string;
      try {
        paymentNo = decodeURIComponent(chargePath[1]);
      } catch {
        throw new HttpError(400, 'malformed paymentNo in path');
      }
      const charge = firstCharge.get(paymentNo);
      return charge ? send(res, 200, charge) : send(res, 404, { error: 'no charge for this paymentNo' });
    }
    if (path === '/refunds') {
      only('POST');
      return postRefund(req, res);
    }
    if (path === '/faults') {
      only('GET', 'PUT');
      if (method === 'PUT') faults = parse(faultsSchema, await readJson(req));
      return send(res, 200, faults);
    }
    if (path === '/ledger') {
      only('GET');
      return send(res, 200, ledger);
    }
    throw new HttpError(404, 'not found');
  }

  const server = http.createServer((req, res) => {
    route(req, res).catch((err: unknown) => {
      if (!(err instanceof HttpError)) return send(res, 500, { error: 'internal error' });
      const allowed = (err as HttpError & { allowed?: string }).allowed;
      send(res, err.status, { error: err.message }, allowed ? { allow: allowed } : {});
    });
  });
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port ?? 0, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const { port } = server.address() as AddressInfo;
  const urlHost = host.includes(':') ? `[${host}]` : host;
  return {
    url: `http://${urlHost}:${port}`,
    port,
    close: () =>
      new Promise<void>((resolve) => {
        for (const timer of timers) clearTimeout(timer);
        timers.clear();
        // The callback also runs (with an error) when already closed, so a second close() resolves too.
        server.close(() => resolve());
        for (const socket of sockets) socket.destroy();
      }),
  };
}

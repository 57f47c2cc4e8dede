// Payment gateway simulator (CONTRACT.md section 9) with fault injection, on node:http only.
// It keeps no log at all, so no request data (and no secret) can leak from it.
import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { deliver, HttpError, hit, newId, parse, readJson, send, serverError } from './simulator-http.js';
import { createRefundDesk } from './simulator-refunds.js';
import type { Charge, Faults, Ledger } from './types.js';
import { chargeRequestSchema, faultsSchema } from './wire.js';

export interface GatewaySimulator {
  url: string;
  port: number;
  close(): Promise<void>;
}

export async function startGatewaySimulator(
  opts: { port?: number; host?: string } = {},
): Promise<GatewaySimulator> {
  const host = opts.host ?? '127.0.0.1';
  const ledger: Ledger = { charges: [], refunds: [] };
  const firstCharge = new Map<string, Charge>();
  const refunds = createRefundDesk(ledger);
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
      if (hit(f.errorRate)) return serverError(res, f, sleep, 'charged');
      charge = { ...input, chargeId: newId('ch'), status: hit(f.declineRate) ? 'DECLINED' : 'SUCCEEDED' };
      ledger.charges.push(charge);
      if (!firstCharge.has(input.paymentNo)) firstCharge.set(input.paymentNo, charge);
    }
    return deliver(req, res, f, sleep, charge);
  }

  /** A key from the path (a paymentNo or refundNo): 400 when it does not decode. */
  function pathKey(encoded: string, name: string): string {
    try {
      return decodeURIComponent(encoded);
    } catch {
      throw new HttpError(400, `malformed ${name} in path`);
    }
  }

  async function route(req: http.IncomingMessage, res: http.ServerResponse) {
    const path = new URL(req.url ?? '/', 'http://simulator').pathname;
    const method = req.method ?? 'GET';
    const only = (...allowed: string[]) => {
      if (!allowed.includes(method))
        throw Object.assign(new HttpError(405, 'method not allowed'), { allowed: allowed.join(', ') });
    };
    const chargePath = /^\/charges\/([^/]+)$/.exec(path);
    const refundPath = /^\/refunds\/([^/]+)$/.exec(path);
    if (path === '/charges') {
      only('POST');
      return postCharge(req, res);
    }
    if (chargePath) {
      only('GET');
      const charge = firstCharge.get(pathKey(chargePath[1], 'paymentNo'));
      return charge ? send(res, 200, charge) : send(res, 404, { error: 'no charge for this paymentNo' });
    }
    if (path === '/refunds') {
      only('POST');
      // One snapshot per request: a PUT /faults arriving meanwhile must not change it half-way.
      return refunds.post(req, res, await readJson(req), faults, sleep);
    }
    if (refundPath) {
      only('GET');
      const refund = refunds.get(pathKey(refundPath[1], 'refundNo'));
      return refund ? send(res, 200, refund) : send(res, 404, { error: 'no refund for this refundNo' });
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

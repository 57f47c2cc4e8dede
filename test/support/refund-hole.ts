import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

/**
 * An HTTP relay to a gateway that can turn into a hole for refunds: POST /refunds is never answered
 * (sent, outcome unknown) and GET /refunds/{refundNo} answers 500 (the query settles nothing), so a
 * refund's outcome stays unknown (202) while charges, and the gateway's state, are left alone.
 * Everything else, and everything when open, is passed to `target`; an upstream that resets or never
 * answers is passed on as a reset or silence.
 */
export async function startRefundHole(target: string) {
  let hole = false;
  let swallowed = 0;
  let holdNext = false;
  let held: Array<() => void> = [];
  const sockets = new Set<Socket>();
  const server = http.createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const path = req.url ?? '/';
    if (hole && path.startsWith('/refunds')) {
      if (req.method === 'POST') {
        swallowed += 1;
        return; // never answered
      }
      res.writeHead(500, { 'content-type': 'application/json' }).end('{"error":"refund hole"}');
      return;
    }
    if (holdNext && req.method === 'POST' && path === '/refunds') {
      // A packet delayed in the network: forwarded only on release(), whoever waits for it by then.
      holdNext = false;
      await new Promise<void>((resolve) => held.push(resolve));
    }
    const abort = new AbortController();
    res.once('close', () => {
      if (!res.writableFinished) abort.abort();
    });
    try {
      const headers: Record<string, string> = {};
      for (const name of ['content-type', 'idempotency-key']) {
        const value = req.headers[name];
        if (typeof value === 'string') headers[name] = value;
      }
      const up = await fetch(target + path, {
        method: req.method,
        headers,
        body: chunks.length > 0 ? Buffer.concat(chunks) : undefined,
        signal: abort.signal,
      });
      const text = await up.text();
      res
        .writeHead(up.status, { 'content-type': up.headers.get('content-type') ?? 'application/json' })
        .end(text);
    } catch {
      req.socket.destroy();
    }
  });
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    /** true: refunds fall into the hole; false: everything passes. */
    set(on: boolean) {
      hole = on;
    },
    /** The next POST /refunds is held back (not forwarded) until release(). */
    holdNext() {
      holdNext = true;
    },
    /** Forwards the held requests now. */
    release() {
      for (const go of held) go();
      held = [];
    },
    /** POST /refunds requests the hole received (and never answered). */
    swallowed: () => swallowed,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        for (const socket of sockets) socket.destroy();
      }),
  };
}

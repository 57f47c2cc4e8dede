import http from 'node:http';
import net, { type Socket } from 'node:net';
import { createGatewayClient } from '../../gateway/client.js';
import { type GatewaySimulator, startGatewaySimulator } from '../../gateway/simulator.js';
import type { GatewayClient, Ledger } from '../../gateway/types.js';
import { stablePort } from './stable-port.js';

/**
 * One loopback port that the service instances know as PAYMENT_GATEWAY_URL, and what answers on it,
 * swapped by the test while the instances keep running:
 * - `simulator()`: the bundled simulator (a fresh ledger each time it is started);
 * - `blackHole()`: a gateway that records nothing, never answers POST /charges and answers
 *   GET /charges/{paymentNo} with 404 (an outcome no query can settle);
 * - `down()`: nothing listens, so a connection is refused (nothing was sent);
 * - `unreachable()` / `reachable()`: the gateway stops listening (open connections are cut, new
 *   ones refused) and later listens again on the same port, keeping its records, as a real gateway's
 *   process stopped and started again does (CONTRACT section 9: "an unreachable gateway is
 *   simulated by stopping the simulator process"). A simulator started afresh would forget every
 *   charge, which no real gateway does: its queries would then answer 404 for charges it made.
 *
 * How: what answers runs on a second, private port, and the slot's port is a TCP relay to it. The
 * relay passes a reset on as a reset (the simulator's "reset after charge"), an end as an end, and
 * a client that hangs up ends the gateway's side too. `client` talks to the private port, so the test
 * can read the ledger and set faults while the gateway is unreachable.
 */
export interface GatewaySlot {
  url: string;
  port: number;
  /** What answers on the port right now. */
  readonly mode: 'simulator' | 'black-hole' | 'down' | 'unreachable';
  /** Talks to the simulator behind the slot (setFaults, ledger); valid while the simulator runs. */
  client: GatewayClient;
  simulator(): Promise<void>;
  blackHole(): Promise<void>;
  down(): Promise<void>;
  /** The running gateway stops listening on the slot's port (refused), keeping its state. */
  unreachable(): Promise<void>;
  /** Listens again on the slot's port after `unreachable()`. */
  reachable(): Promise<void>;
  ledger(): Promise<Ledger>;
  /** POST /charges requests the black hole received (and never answered). */
  blackHoleCharges(): number;
  close(): Promise<void>;
}

interface Running {
  close(): Promise<void>;
}

export async function startGatewaySlot(): Promise<GatewaySlot> {
  // Both are listened on again after each outage the test makes: ports no outgoing connection takes.
  const port = await stablePort();
  const url = `http://127.0.0.1:${port}`;
  const backendPort = await stablePort();
  // Patient: the test's own calls must never time out while the service's calls do.
  const client = createGatewayClient({ baseUrl: `http://127.0.0.1:${backendPort}`, timeoutMs: 5000 });
  let backend: Running | undefined;
  let front: Running | undefined;
  let backendMode: 'simulator' | 'black-hole' | undefined;
  let listening = false;
  let swallowed = 0;

  async function stopCurrent(): Promise<void> {
    const [f, b] = [front, backend];
    front = undefined;
    backend = undefined;
    backendMode = undefined;
    listening = false;
    await f?.close();
    await b?.close();
  }

  async function listen(): Promise<void> {
    front = await startRelay(port, backendPort);
    listening = true;
  }

  const slot: GatewaySlot = {
    url,
    port,
    client,
    get mode() {
      if (!backendMode) return 'down';
      return listening ? backendMode : 'unreachable';
    },
    async simulator() {
      await stopCurrent();
      const sim: GatewaySimulator = await startGatewaySimulator({ port: backendPort, host: '127.0.0.1' });
      backend = sim;
      backendMode = 'simulator';
      await listen();
    },
    async blackHole() {
      await stopCurrent();
      backend = await startBlackHole(backendPort, () => {
        swallowed += 1;
      });
      backendMode = 'black-hole';
      await listen();
    },
    async down() {
      await stopCurrent();
    },
    async unreachable() {
      const f = front;
      front = undefined;
      listening = false;
      await f?.close();
    },
    async reachable() {
      if (!backendMode) throw new Error('nothing to reach: start the simulator or the black hole first');
      if (!listening) await listen();
    },
    ledger: () => client.ledger(),
    blackHoleCharges: () => swallowed,
    async close() {
      await stopCurrent();
      await client.close();
    },
  };
  await slot.simulator();
  return slot;
}

/** A TCP relay from `port` to `target`: each connection gets one of its own to the target. */
async function startRelay(port: number, target: number): Promise<Running> {
  const sockets = new Set<Socket>();
  const server = net.createServer((down) => {
    const up = net.connect(target, '127.0.0.1');
    for (const s of [down, up]) {
      sockets.add(s);
      s.once('close', () => sockets.delete(s));
    }
    down.pipe(up);
    up.pipe(down);
    // A reset from the gateway reaches the client as a reset (an unknown outcome, as without the
    // relay); a client that hangs up or fails ends the gateway's side.
    up.on('error', () => {
      if (!down.destroyed) down.resetAndDestroy();
    });
    down.on('error', () => up.destroy());
    down.once('close', () => up.destroy());
  });
  return listenOn(server, port, sockets);
}

async function startBlackHole(port: number, onCharge: () => void): Promise<Running> {
  const sockets = new Set<Socket>();
  const server = http.createServer((req, res) => {
    const path = new URL(req.url ?? '/', 'http://black-hole').pathname;
    req.resume();
    if (req.method === 'POST' && path === '/charges') {
      onCharge();
      return; // never answered; the caller's time-out (or close()) ends it
    }
    res.writeHead(404, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ error: 'no charge for this paymentNo' }));
  });
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });
  return listenOn(server, port, sockets);
}

/** Listens on 127.0.0.1:port; close() stops listening and destroys the sockets still open. */
async function listenOn(server: net.Server, port: number, sockets: Set<Socket>): Promise<Running> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  return {
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        for (const socket of sockets) socket.destroy();
      }),
  };
}

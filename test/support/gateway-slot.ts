import http from 'node:http';
import type { Socket } from 'node:net';
import { freePort } from '../../core/embedded-postgres.js';
import { createGatewayClient } from '../../gateway/client.js';
import { type GatewaySimulator, startGatewaySimulator } from '../../gateway/simulator.js';
import type { GatewayClient, Ledger } from '../../gateway/types.js';

/**
 * One loopback port that the service instances know as PAYMENT_GATEWAY_URL, and what answers on it,
 * swapped by the test while the instances keep running:
 * - `simulator()`: the bundled simulator (a fresh ledger each time it is started);
 * - `blackHole()`: a gateway that records nothing, never answers POST /charges and answers
 *   GET /charges/{paymentNo} with 404 (an outcome no query can settle);
 * - `down()`: nothing listens, so a connection is refused (nothing was sent).
 */
export interface GatewaySlot {
  url: string;
  port: number;
  /** What answers on the port right now. */
  readonly mode: 'simulator' | 'black-hole' | 'down';
  /** Talks to the simulator on the slot (setFaults, ledger); valid while the simulator runs. */
  client: GatewayClient;
  simulator(): Promise<void>;
  blackHole(): Promise<void>;
  down(): Promise<void>;
  ledger(): Promise<Ledger>;
  /** POST /charges requests the black hole received (and never answered). */
  blackHoleCharges(): number;
  close(): Promise<void>;
}

interface Running {
  close(): Promise<void>;
}

export async function startGatewaySlot(): Promise<GatewaySlot> {
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  // Patient: the test's own calls must never time out while the service's calls do.
  const client = createGatewayClient({ baseUrl: url, timeoutMs: 5000 });
  let running: Running | undefined;
  let mode: GatewaySlot['mode'] = 'down';
  let swallowed = 0;

  async function stopCurrent(): Promise<void> {
    const current = running;
    running = undefined;
    mode = 'down';
    await current?.close();
  }

  const slot: GatewaySlot = {
    url,
    port,
    client,
    get mode() {
      return mode;
    },
    async simulator() {
      await stopCurrent();
      const sim: GatewaySimulator = await startGatewaySimulator({ port, host: '127.0.0.1' });
      running = sim;
      mode = 'simulator';
    },
    async blackHole() {
      await stopCurrent();
      running = await startBlackHole(port, () => {
        swallowed += 1;
      });
      mode = 'black-hole';
    },
    async down() {
      await stopCurrent();
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

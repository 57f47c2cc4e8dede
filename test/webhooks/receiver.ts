import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { Webhook } from 'standardwebhooks';

/**
 * A real webhook receiver on loopback. Each endpoint is a path (`/hook/<name>`) with its secret; every
 * request is verified with the `standardwebhooks` package, recorded, and answered as the endpoint's
 * behaviour says. It counts the requests in progress per endpoint and webhook-id, so a test can prove
 * that no two attempts of one delivery ran at once.
 */

/** What the receiver does with one request: an HTTP status, or hold it open until released. */
export type Action = { status: number } | { hold: true } | { redirect: string };

export interface Received {
  name: string;
  webhookId: string;
  verified: boolean;
  body: { id: string; type: string; createdAt: string; data: unknown };
  /** Whether the receiver answered 2xx (a held request: once releaseHeld answered it so). */
  accepted: boolean;
  peerPort: number;
}

interface Hook {
  secret?: string;
  /** The action for the n-th request (1-based) of this endpoint. */
  behave: (n: number, webhookId: string) => Action;
  count: number;
}

export class Receiver {
  private server?: http.Server;
  private readonly hooks = new Map<string, Hook>();
  private readonly sockets = new Set<Socket>();
  private readonly inProgress = new Map<string, number>();
  private readonly held: Array<{ res: http.ServerResponse; peerPort: number; record: Received }> = [];
  readonly received: Received[] = [];
  /** The most requests ever in progress at once for one endpoint and webhook-id. */
  maxConcurrent = 0;
  port = 0;

  async start(port = 0): Promise<this> {
    const server = http.createServer((req, res) => this.handle(req, res));
    server.on('connection', (socket) => {
      this.sockets.add(socket);
      socket.on('close', () => this.sockets.delete(socket));
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, '127.0.0.1', resolve);
    });
    this.server = server;
    this.port = (server.address() as AddressInfo).port;
    return this;
  }

  /** Stops listening and drops every connection: the receiver is down (start(port) brings it back). */
  async stop(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    if (!server) return;
    for (const socket of this.sockets) socket.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  url(name: string): string {
    return `http://127.0.0.1:${this.port}/hook/${name}`;
  }

  hook(name: string, behave: Hook['behave'] = () => ({ status: 204 })): void {
    this.hooks.set(name, { behave, count: 0 });
  }

  setSecret(name: string, secret: string): void {
    const hook = this.hooks.get(name);
    if (!hook) throw new Error(`no hook ${name}`);
    hook.secret = secret;
  }

  of(name: string): Received[] {
    return this.received.filter((r) => r.name === name);
  }

  heldCount(): number {
    return this.held.length;
  }

  /** The source ports of the held requests whose connection is still open. */
  heldPeerPorts(): number[] {
    return this.held.filter((h) => !h.res.socket?.destroyed).map((h) => h.peerPort);
  }

  /**
   * Answers every held request whose connection is still open with this status, and records a 2xx
   * as accepted: its sender, if still waiting, counts the delivery done and never sends it again.
   */
  releaseHeld(status = 200): void {
    for (const { res, record } of this.held.splice(0)) {
      if (res.destroyed) continue;
      res.writeHead(status).end();
      record.accepted = status >= 200 && status < 300;
    }
  }

  private handle(req: http.IncomingMessage, res: http.ServerResponse): void {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const name = (req.url ?? '').replace(/^\/hook\//, '');
      const hook = this.hooks.get(name);
      if (!hook) return void res.writeHead(404).end();
      const text = Buffer.concat(chunks).toString('utf8');
      const webhookId = String(req.headers['webhook-id'] ?? '');
      let verified = false;
      try {
        if (hook.secret) {
          new Webhook(hook.secret).verify(text, {
            'webhook-id': webhookId,
            'webhook-timestamp': String(req.headers['webhook-timestamp'] ?? ''),
            'webhook-signature': String(req.headers['webhook-signature'] ?? ''),
          });
          verified = true;
        }
      } catch {
        verified = false;
      }
      const key = `${name}|${webhookId}`;
      const now = (this.inProgress.get(key) ?? 0) + 1;
      this.inProgress.set(key, now);
      this.maxConcurrent = Math.max(this.maxConcurrent, now);
      let done = false;
      const end = () => {
        if (done) return;
        done = true;
        this.inProgress.set(key, (this.inProgress.get(key) ?? 1) - 1);
      };
      res.on('finish', end);
      res.on('close', end);
      hook.count += 1;
      const action = hook.behave(hook.count, webhookId);
      const peerPort = req.socket.remotePort ?? 0;
      const record = (accepted: boolean): Received => {
        const r: Received = { name, webhookId, verified, body: JSON.parse(text), accepted, peerPort };
        this.received.push(r);
        return r;
      };
      if ('hold' in action) {
        this.held.push({ res, peerPort, record: record(false) });
        return;
      }
      if ('redirect' in action) {
        record(false);
        return void res.writeHead(302, { location: action.redirect }).end();
      }
      record(action.status >= 200 && action.status < 300);
      res.writeHead(action.status).end();
    });
  }
}

/**
 * Polls until `check` holds (or throws with `what` after `withinMs`). The default bound covers the
 * dispatcher's documented pause after an instance died holding its run (docs/DECISIONS.md "Webhook
 * deliveries": the run's expiry plus a maintenance round, about 25 s), which the files before a
 * webhook test cause when they SIGKILL their instances at the end. (Waits of 60 s and more in full
 * runs came from an instance with a skewed clock scheduling the chain late, fixed in core/jobs.ts.)
 */
export async function until(
  what: string,
  check: () => boolean | Promise<boolean>,
  withinMs = 120_000,
): Promise<void> {
  const deadline = Date.now() + withinMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for: ${what}`);
    await sleep(100);
  }
}

/**
 * The pid (among `pids`) whose TCP socket has local port `port` on loopback: which process sent a
 * request the receiver holds. Linux /proc; undefined when it cannot tell.
 */
export function pidOfLocalPort(port: number, pids: number[]): number | undefined {
  const inodes = new Set<string>();
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let text: string;
    try {
      text = readFileSync(table, 'utf8');
    } catch {
      continue;
    }
    for (const line of text.split('\n').slice(1)) {
      const cols = line.trim().split(/\s+/);
      if (cols.length < 10) continue;
      const local = cols[1];
      if (Number.parseInt(local.slice(local.lastIndexOf(':') + 1), 16) === port) inodes.add(cols[9]);
    }
  }
  for (const pid of pids) {
    let fds: string[];
    try {
      fds = readdirSync(`/proc/${pid}/fd`);
    } catch {
      continue;
    }
    for (const fd of fds) {
      try {
        const link = readlinkSync(`/proc/${pid}/fd/${fd}`);
        const m = /^socket:\[(\d+)\]$/.exec(link);
        if (m && inodes.has(m[1])) return pid;
      } catch {
        // closed meanwhile
      }
    }
  }
  return undefined;
}

/**
 * Ends the endpoints that point at this receiver's port (DELETED, their pending deliveries FAILED),
 * as a DELETE does: once the receiver is gone, later tests' instances must not keep retrying them
 * into a port that another test may listen on.
 */
export async function retireEndpoints(port: number): Promise<void> {
  const client = new pg.Client({ connectionString: process.env.TEST_DATABASE_URL });
  await client.connect();
  try {
    await client.query(
      `WITH gone AS (UPDATE webhook_endpoints SET status = 'DELETED', deleted_at = now()
                      WHERE url LIKE $1 AND status = 'ENABLED' RETURNING id)
       UPDATE webhook_deliveries SET status = 'FAILED', last_error = 'endpoint deleted', next_attempt_at = NULL,
              lease_owner = NULL, lease_until = NULL
        WHERE status = 'PENDING' AND endpoint_id IN (SELECT id FROM webhook_endpoints WHERE url LIKE $1)`,
      [`http://127.0.0.1:${port}/%`],
    );
  } finally {
    await client.end();
  }
}

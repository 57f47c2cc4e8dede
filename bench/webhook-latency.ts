/**
 * Commit → webhook receiver latency with a healthy receiver (issue 28's performance list; figures in
 * docs/BENCHMARKS.md). `node --import tsx bench/webhook-latency.ts [N] [INSTANCES]` (default 100, 1).
 *
 * A PostgreSQL (embedded, or a scratch database on DATABASE_URL), INSTANCES service processes
 * (`server/main.ts` through tsx, default settings), one endpoint (all types) at a receiver on loopback
 * that verifies every signature with `standardwebhooks`. N orders are created one after another,
 * 100 ms apart, round robin over the instances; each order.created event's latency is measured from
 * the create's 201 (its transaction committed before the answer) to the receiver's arrival. Printed:
 * p50, p90, p99, max; every event must arrive, verified.
 */
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { Webhook } from 'standardwebhooks';
import { freePort } from '../core/embedded-postgres.js';
import { signToken } from '../routers/auth/jwt.js';
import { killQuietly, openBenchDatabase } from './postgres.js';
import { type Child, startNode } from './processes.js';
import { SECRETS } from './settings.js';

const N = Number(process.argv[2] ?? 100);
const INSTANCES = Number(process.argv[3] ?? 1);
const GAP_MS = 100;

const pct = (sorted: number[], p: number) =>
  sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];

async function main(): Promise<void> {
  const log = (line: string) => console.error(line);
  const db = await openBenchDatabase(log, { tcp: false });
  const services: Child[] = [];
  let receiver: http.Server | undefined;
  try {
    for (let i = 0; i < INSTANCES; i++) {
      const port = await freePort();
      services.push(
        await startNode({
          name: `service-${i}`,
          args: ['--import', 'tsx', 'server/main.ts'],
          env: { ...SECRETS, DATABASE_URL: db.url, PORT: String(port), HOST: '127.0.0.1', LOG_LEVEL: 'warn' },
          port,
          readyPath: '/readyz',
          timeoutMs: 120_000,
        }),
      );
    }
    const arrivals = new Map<string, { at: number; verified: boolean }>();
    let secret = '';
    receiver = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const at = performance.now();
        const body = Buffer.concat(chunks).toString('utf8');
        let verified = false;
        try {
          new Webhook(secret).verify(body, req.headers as Record<string, string>);
          verified = true;
        } catch {
          verified = false;
        }
        const event = JSON.parse(body) as { type: string; data: { merchantOrderNo?: string } };
        const no = event.data.merchantOrderNo;
        if (event.type === 'order.created' && no && !arrivals.has(no)) arrivals.set(no, { at, verified });
        res.writeHead(204).end();
      });
    });
    await new Promise<void>((resolve) => receiver?.listen(0, '127.0.0.1', resolve));
    const receiverPort = (receiver.address() as AddressInfo).port;
    const tenant = `bench-wh-${randomBytes(3).toString('hex')}`;
    const admin = `Bearer ${signToken(SECRETS.JWT_SECRET, { tenantId: tenant, userId: '1', role: 'admin' }, 3600).token}`;
    const created = await fetch(`${services[0].url}/api/v1/webhook-endpoints`, {
      method: 'POST',
      headers: { authorization: admin, 'content-type': 'application/json' },
      body: JSON.stringify({ url: `http://127.0.0.1:${receiverPort}/hook` }),
    });
    if (created.status !== 201) throw new Error(`endpoint: ${created.status} ${await created.text()}`);
    secret = ((await created.json()) as { data: { secret: string } }).data.secret;

    const answered = new Map<string, number>();
    for (let i = 0; i < N; i++) {
      const no = `wh-${i}`;
      const res = await fetch(`${services[i % services.length].url}/api/v1/orders`, {
        method: 'POST',
        headers: {
          authorization: admin,
          'content-type': 'application/json',
          'idempotency-key': `bench-key-${tenant}-${i}`,
        },
        body: JSON.stringify({ merchantOrderNo: no, amount: '1.00' }),
      });
      answered.set(no, performance.now());
      if (res.status !== 201) throw new Error(`order ${i}: ${res.status} ${await res.text()}`);
      await res.arrayBuffer();
      await sleep(GAP_MS);
    }
    const deadline = Date.now() + 120_000;
    while (arrivals.size < N && Date.now() < deadline) await sleep(100);
    const latencies = [...answered].map(([no, t]) => (arrivals.get(no)?.at ?? Number.NaN) - t);
    const missing = latencies.filter((l) => Number.isNaN(l)).length;
    const unverified = [...arrivals.values()].filter((a) => !a.verified).length;
    const sorted = latencies.filter((l) => !Number.isNaN(l)).sort((a, b) => a - b);
    const f = (v: number) => `${Math.round(v)} ms`;
    console.log(
      `webhook latency (201 answer → receiver), ${N} events, ${INSTANCES} instance(s), ${GAP_MS} ms apart: ` +
        `p50 ${f(pct(sorted, 50))}, p90 ${f(pct(sorted, 90))}, p99 ${f(pct(sorted, 99))}, max ${f(sorted[sorted.length - 1])}; ` +
        `missing ${missing}, unverified ${unverified}`,
    );
    if (missing > 0 || unverified > 0) process.exitCode = 1;
  } finally {
    receiver?.close();
    for (const s of services) await s.stop().catch(() => killQuietly(s.pid));
    await db.stop();
  }
}

await main();

/**
 * What an effect costs against a plain create, and what an export does to the request path (issues 27
 * and 28): one service instance (tsx, as the tests start it; the bundled gateway simulator in it),
 * an embedded PostgreSQL (or a scratch database on DATABASE_URL's server).
 *
 *   node --import tsx bench/effects-cost.ts [N=400] [CONCURRENCY=8] [EXPORT_ROWS=300000]
 *
 * 1. N plain user creates (no key), N keyed order creates, N payments (one per order), N refunds (one
 *    partial refund per payment), each at CONCURRENCY: answers per second and the service's and
 *    PostgreSQL's CPU per answer. Ratios: payment ÷ plain create, refund ÷ payment.
 * 2. The request path during an export: keyed order creates at CONCURRENCY for 10 s with no export
 *    running, then for as long as an export of EXPORT_ROWS orders runs: p50/p99 of each, the ratio.
 */
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { freePort } from '../core/embedded-postgres.js';
import { signToken } from '../routers/auth/jwt.js';
import { openBenchDatabase } from './postgres.js';
import { cpuOf, postgresCpuOf, startNode } from './processes.js';
import { SECRETS } from './settings.js';

const N = Number(process.argv[2] ?? 400);
const CONCURRENCY = Number(process.argv[3] ?? 8);
const EXPORT_ROWS = Number(process.argv[4] ?? 300_000);
const TENANT = 'bench-effects';

const quantile = (sorted: number[], q: number) =>
  sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];

async function main() {
  const db = await openBenchDatabase((line) => console.error(line), { tcp: false });
  const port = await freePort();
  const service = await startNode({
    name: 'service',
    args: ['--import', 'tsx', 'server/main.ts'],
    env: {
      ...SECRETS,
      NODE_ENV: 'test',
      LOG_LEVEL: 'warn',
      DATABASE_URL: db.url,
      HOST: '127.0.0.1',
      PORT: String(port),
    },
    port,
    readyPath: '/readyz',
    timeoutMs: 120000,
  });
  const token = signToken(SECRETS.JWT_SECRET, { tenantId: TENANT, userId: '1', role: 'admin' }, 3600).token;
  const call = async (method: string, path: string, body?: unknown, keyed = true) => {
    const res = await fetch(`${service.url}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${token}`,
        'content-type': 'application/json',
        ...(keyed ? { 'idempotency-key': randomUUID() } : {}),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    return { status: res.status, body: text ? JSON.parse(text) : undefined };
  };
  // `count` calls of `one(i)` at CONCURRENCY; answers/s and CPU per answer.
  const phase = async (name: string, count: number, one: (i: number) => Promise<number>, expect: number) => {
    const cpu0 = cpuOf(service.pid);
    const pg0 = db.pid ? postgresCpuOf(db.pid) : Number.NaN;
    const t0 = performance.now();
    let next = 0;
    const bad: number[] = [];
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async () => {
        for (let i = next++; i < count; i = next++) {
          const status = await one(i);
          if (status !== expect) bad.push(status);
        }
      }),
    );
    const seconds = (performance.now() - t0) / 1000;
    const row = {
      name,
      perSecond: count / seconds,
      serviceMs: (cpuOf(service.pid) - cpu0) / count,
      postgresMs: db.pid ? (postgresCpuOf(db.pid) - pg0) / count : Number.NaN,
    };
    console.log(
      `${name}: ${row.perSecond.toFixed(0)}/s, CPU per answer: service ${row.serviceMs.toFixed(3)} ms, PostgreSQL ${row.postgresMs.toFixed(3)} ms${bad.length ? `; ${bad.length} unexpected statuses ${[...new Set(bad)]}` : ''}`,
    );
    return row;
  };
  try {
    const run = randomUUID().slice(0, 8);
    const plain = await phase(
      'plain user create',
      N,
      async (i) => (await call('POST', '/api/v1/users', { name: `u${i}`, age: 30 }, false)).status,
      201,
    );
    const orders = await phase(
      'keyed order create',
      N,
      async (i) =>
        (await call('POST', '/api/v1/orders', { merchantOrderNo: `${run}-${i}`, amount: '10.00' })).status,
      201,
    );
    const paymentIds: string[] = [];
    const payments = await phase(
      'payment',
      N,
      async (i) => {
        const r = await call('POST', '/api/v1/payments', { merchantOrderNo: `${run}-${i}`, amount: '10.00' });
        paymentIds[i] = r.body?.data?.id;
        return r.status;
      },
      201,
    );
    const refunds = await phase(
      'refund (partial)',
      N,
      async (i) =>
        (await call('POST', `/api/v1/payments/${paymentIds[i]}/refunds`, { amount: '2.50' })).status,
      201,
    );
    console.log(
      `payment ÷ plain create (answers/s): ${(payments.perSecond / plain.perSecond).toFixed(3)}; keyed order ÷ plain: ${(orders.perSecond / plain.perSecond).toFixed(3)}`,
    );
    console.log(
      `refund ÷ payment: answers/s ${(refunds.perSecond / payments.perSecond).toFixed(3)}, service CPU ${(refunds.serviceMs / payments.serviceMs).toFixed(3)}, PostgreSQL CPU ${(refunds.postgresMs / payments.postgresMs).toFixed(3)}`,
    );

    // 2. The request path with and without an export running.
    const client = new pg.Client({ connectionString: db.url });
    await client.connect();
    await client.query(
      `INSERT INTO orders (tenant_id, user_id, merchant_order_no, amount, currency, status, created_at, updated_at)
       SELECT $1, 1, 'x-' || g, 10.50, 'USD', 'CREATED', now() - interval '1 day', now() - interval '1 day'
         FROM generate_series(1, $2::int) g`,
      [TENANT, EXPORT_ROWS],
    );
    await client.end();
    const latencies = async (until: () => boolean, minMs: number) => {
      const out: number[] = [];
      const t0 = performance.now();
      let i = 0;
      await Promise.all(
        Array.from({ length: CONCURRENCY }, async () => {
          while (performance.now() - t0 < minMs || !until()) {
            const s = performance.now();
            const r = await call('POST', '/api/v1/orders', {
              merchantOrderNo: `${run}-l${i++}`,
              amount: '1.00',
            });
            if (r.status !== 201) throw new Error(`order: ${r.status}`);
            out.push(performance.now() - s);
            if (performance.now() - t0 > 600_000) break;
          }
        }),
      );
      return out.sort((a, b) => a - b);
    };
    const quiet = await latencies(() => true, 10_000);
    const started = await call('POST', '/api/v1/exports', { resource: 'orders', format: 'csv' });
    if (started.status !== 202) throw new Error(`export: ${started.status}`);
    const id = started.body.data.resourceId;
    let done = false;
    const t0 = performance.now();
    const poll = (async () => {
      while (!done) {
        const r = await call('GET', `/api/v1/exports/${id}`, undefined, false);
        if (r.body?.data?.status !== 'PROCESSING') done = true;
        else await new Promise((resolve) => setTimeout(resolve, 200));
      }
    })();
    const busy = await latencies(() => done, 0);
    await poll;
    const exportSeconds = (performance.now() - t0) / 1000;
    const fmt = (xs: number[]) =>
      `p50 ${quantile(xs, 0.5).toFixed(1)} ms, p99 ${quantile(xs, 0.99).toFixed(1)} ms (n=${xs.length})`;
    console.log(`keyed order create, no export running: ${fmt(quiet)}`);
    console.log(
      `keyed order create, while a ${EXPORT_ROWS}-row export ran (${exportSeconds.toFixed(1)} s): ${fmt(busy)}`,
    );
    console.log(`p99 during ÷ without: ${(quantile(busy, 0.99) / quantile(quiet, 0.99)).toFixed(2)}`);
  } finally {
    await service.stop();
    await db.stop();
  }
}

main().catch((err) => {
  console.error(err);
  process.exitCode = 1;
});

/**
 * What an effect costs against a plain create, and what an export does to the request path (issues 27
 * and 28): one service instance (tsx, as the tests start it; the bundled gateway simulator in it),
 * an embedded PostgreSQL (or a scratch database on DATABASE_URL's server).
 *
 *   node --import tsx bench/effects-cost.ts [N=400] [CONCURRENCY=8] [EXPORT_ROWS=300000] [--no-outbox]
 *
 * --no-outbox disables the events triggers on the scratch database once the service has migrated it
 * (a what-if for the outbox's cost; never a setting of the service: every change writes its event).
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

const args = process.argv.slice(2).filter((a) => !a.startsWith('--'));
const NO_OUTBOX = process.argv.includes('--no-outbox');
const N = Number(args[0] ?? 400);
const CONCURRENCY = Number(args[1] ?? 8);
const EXPORT_ROWS = Number(args[2] ?? 300_000);
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
  if (NO_OUTBOX) {
    const off = new pg.Client({ connectionString: db.url });
    await off.connect();
    for (const [table, trigger] of [
      ['orders', 'orders_event'],
      ['payments', 'payments_event'],
      ['refunds', 'refunds_event'],
      ['exports', 'exports_event'],
    ])
      await off.query(`ALTER TABLE ${table} DISABLE TRIGGER ${trigger}`);
    await off.end();
    console.log('the outbox triggers are disabled (what-if)');
  }
  // Admins with no user row (the token's role stands), taken in turn: one user's retained records
  // stay under IDEMPOTENCY_MAX_RETAINED.
  const tokens = Array.from(
    { length: 64 },
    (_, i) =>
      signToken(
        SECRETS.JWT_SECRET,
        { tenantId: TENANT, userId: String(900_000_001 + i), role: 'admin' },
        3600,
      ).token,
  );
  let turn = 0;
  let refused = 0;
  const call = async (method: string, path: string, body?: unknown, keyed = true) => {
    const token = tokens[turn++ % tokens.length];
    const init: RequestInit = {
      method,
      headers: {
        authorization: `Bearer ${token}`,
        'content-type': 'application/json',
        ...(keyed ? { 'idempotency-key': randomUUID() } : {}),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    };
    // A refused connection sent nothing: sent again with the same key, and counted (reported below).
    let res: Response | undefined;
    for (let attempt = 1; !res; attempt++) {
      try {
        res = await fetch(`${service.url}${path}`, init);
      } catch (err) {
        if (attempt >= 5 || !String((err as Error).cause).includes('ECONNREFUSED')) throw err;
        refused += 1;
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    }
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
    console.log(`connections refused (and sent again) during the run: ${refused}`);
    console.log(`p99 during ÷ without: ${(quantile(busy, 0.99) / quantile(quiet, 0.99)).toFixed(2)}`);
  } catch (err) {
    const ready = await fetch(`${service.url}/readyz`).then(
      (r) => r.status,
      (e: Error) => String(e.cause ?? e),
    );
    console.error(`readyz now: ${ready}`);
    console.error(
      `service exit: ${service.child.exitCode} ${service.child.signalCode}; output (tail):\n${service.output().slice(-4000)}`,
    );
    throw err;
  } finally {
    await service.stop();
    await db.stop();
  }
}

main().catch((err) => {
  console.error(err);
  process.exitCode = 1;
});

/**
 * `node --import tsx bench/outbox-cost.ts [--seconds=S] [--rounds=N] [--clients=C]`: what the
 * transactional outbox (the events trigger, models/migrations/20261127000001) costs a write, measured
 * in the database alone so that nothing else of the service blurs it: pgbench runs an order INSERT
 * (the statement every order create ends in; it fires order.created) and a payment's finalise-like
 * UPDATE to SUCCEEDED (it fires payment.succeeded), with the trigger enabled and disabled in
 * alternating rounds on one scratch database (embedded, or DATABASE_URL's server). Reports
 * transactions per second and mean latency of each, the ratio, and the bytes per event row.
 */
import pg from 'pg';
import { Sequelize } from 'sequelize';
import { migrate } from '../models/migrate.js';
import { runPgbench } from './pgbench.js';
import { killQuietly, openBenchDatabase } from './postgres.js';

const arg = (name: string, fallback: number) => {
  const found = process.argv.find((a) => a.startsWith(`--${name}=`));
  return found ? Number(found.slice(name.length + 3)) : fallback;
};
const SECONDS = arg('seconds', 10);
const ROUNDS = arg('rounds', 3);
const CLIENTS = arg('clients', 8);

const INSERT = `\\set mo random(1, 9000000000000000000)
\\set uid random(1, 1000)
INSERT INTO orders (tenant_id, user_id, merchant_order_no, amount, currency, status, created_at, updated_at)
VALUES ('bench', :uid, 'mo-' || :mo, 10.50, 'USD', 'CREATED', now(), now());
`;
// A payment's state change: PROCESSING → SUCCEEDED (fires payment.succeeded), then back, in one
// transaction each, on rows prepared below.
const SETTLE = `\\set id random(1, 20000)
UPDATE payments SET status = 'SUCCEEDED', updated_at = now() WHERE id = 'bench-' || :id AND status = 'PROCESSING';
UPDATE payments SET status = 'PROCESSING', updated_at = now() WHERE id = 'bench-' || :id AND status = 'SUCCEEDED';
`;

async function main(): Promise<void> {
  const db = await openBenchDatabase((line) => console.error(line), { tcp: false });
  const sequelize = new Sequelize(db.url, { logging: false });
  const client = new pg.Client({ connectionString: db.url });
  try {
    await migrate(sequelize);
    await client.connect();
    await client.query(`
      INSERT INTO orders (id, tenant_id, user_id, merchant_order_no, amount, currency, status, created_at, updated_at)
      SELECT -g, 'bench', 1, 'pay-' || g, 10.50, 'USD', 'CREATED', now(), now() FROM generate_series(1, 20000) g;
      INSERT INTO payments (id, payment_no, merchant_id, merchant_order_no, order_id, user_id, amount, currency, status)
      SELECT 'bench-' || g, 'pn-' || g, 'bench', 'pay-' || g, -g, 1, 10.50, 'USD', 'PROCESSING' FROM generate_series(1, 20000) g;
      DELETE FROM events;`);
    await client.query('VACUUM ANALYZE');
    const totals: Record<string, { tps: number[]; latencyMs: number[] }> = {};
    for (let round = 1; round <= ROUNDS; round++) {
      for (const outbox of round % 2 === 1 ? ['on', 'off'] : ['off', 'on']) {
        const state = outbox === 'on' ? 'ENABLE' : 'DISABLE';
        await client.query(
          `ALTER TABLE orders ${state} TRIGGER orders_event; ALTER TABLE payments ${state} TRIGGER payments_event`,
        );
        for (const [name, script] of [
          ['order insert', INSERT],
          ['payment settle', SETTLE],
        ] as const) {
          await client.query('CHECKPOINT');
          const r = await runPgbench({
            url: db.url,
            password: db.password,
            script,
            name: 'outbox',
            clients: CLIENTS,
            seconds: SECONDS,
          });
          const key = `${name}, outbox ${outbox}`;
          totals[key] ??= { tps: [], latencyMs: [] };
          totals[key].tps.push(r.tps);
          totals[key].latencyMs.push(r.p50);
          console.error(`round ${round}: ${key}: ${r.tps.toFixed(0)} tps, p50 ${r.p50.toFixed(3)} ms`);
        }
      }
    }
    const { rows } = await client.query<{ n: string; bytes: string }>(
      `SELECT count(*)::text AS n, pg_total_relation_size('events')::text AS bytes FROM events`,
    );
    const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
    console.log(
      `outbox cost, pgbench -c ${CLIENTS}, ${ROUNDS} rounds of ${SECONDS} s each, median of rounds:`,
    );
    for (const name of ['order insert', 'payment settle']) {
      const on = median(totals[`${name}, outbox on`].tps);
      const off = median(totals[`${name}, outbox off`].tps);
      console.log(
        `  ${name}: ${on.toFixed(0)} tps with the outbox, ${off.toFixed(0)} without: ratio ${(on / off).toFixed(3)}`,
      );
    }
    const n = Number(rows[0].n);
    console.log(
      `  events written: ${n}; ${(Number(rows[0].bytes) / Math.max(1, n)).toFixed(0)} bytes per event (heap + indexes)`,
    );
  } finally {
    await client.end().catch(() => {});
    await sequelize.close().catch(() => {});
    await db.stop().catch(() => {
      if (db.pid) killQuietly(db.pid);
    });
  }
}

main().catch((err) => {
  console.error(err);
  process.exitCode = 1;
});

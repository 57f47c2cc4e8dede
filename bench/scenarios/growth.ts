import type pg from 'pg';
import { claimStatement } from '../../idempotency/caps.js';
import { READ_RECORD_SQL } from '../../idempotency/record-store.js';
import type { BenchRun } from '../bench-run.js';
import { count, explain, fill, interleaved, loadRow, rowsLabel, seedKeys, settle } from '../measure.js';
import { r2, ratio } from '../report.js';
import { ADMIN_BASE, DEFAULT_MAX_RETAINED, MAX_IN_FLIGHT, MAX_RETAINED, TENANT } from '../settings.js';

/** The engine's own claim statement (idempotency/caps.ts), for EXPLAIN ANALYZE; values as literals. */
const literal = (v: string) => `'${v.replace(/'/g, "''")}'`;
const claimSql = (scopeKey: string, userScope: string, maxRetained: number) =>
  claimStatement(literal, {
    scopeKey,
    requestHash: 'x'.repeat(64),
    userScope,
    operation: 'users.create',
    ttlSeconds: 86400,
    maxInFlight: MAX_IN_FLIGHT,
    maxRetained,
  });

export async function growthScenario(ctx: BenchRun): Promise<void> {
  const { P, log, results, rows, plainUser, idemUser, replayRequest, newReplayKeys, runId } = ctx;
  const { sql, server } = ctx;
  log('growth: emptying idempotency_records');
  await sql.query('TRUNCATE idempotency_records, idempotency_slots');
  const keys = newReplayKeys(P.growthSeeds);
  await fill(ctx, sql, 'fill', P.growthSmall - keys.length, '24 hours');
  await seedKeys(ctx, server.url, keys);
  await settle(ctx, sql);
  // Replay and create at each table size, interleaved with plain create as a control: plain create
  // never touches idempotency_records, so its drift between the two phases is the machine's (other
  // load, JIT), not the table's. The target is judged on the ratio corrected by that drift.
  const phase = async (label: string) => {
    const rowsNow = await count(sql, 'SELECT count(*) AS n FROM idempotency_records');
    let i = 0;
    const r = await interleaved(
      ctx,
      [
        {
          name: `growth-replay-${label}`,
          url: server.url,
          next: () => replayRequest(keys[i++ % keys.length]),
        },
        { name: `growth-create-${label}`, url: server.url, next: idemUser },
        { name: `growth-control-${label}`, url: server.url, next: plainUser },
      ],
      P.growthRounds,
      P.growthSegment,
    );
    return {
      rows: rowsNow,
      replay: r[`growth-replay-${label}`],
      create: r[`growth-create-${label}`],
      control: r[`growth-control-${label}`],
    };
  };
  const small = await phase('small');
  const current = await count(sql, 'SELECT count(*) AS n FROM idempotency_records');
  await fill(ctx, sql, 'fill', P.growthBig - current, '24 hours');
  await settle(ctx, sql);
  const user = `${TENANT}:${ADMIN_BASE + 1}`;
  // A user just under the default retained cap: the claim counts up to 10 000 of its records.
  const heavy = `${TENANT}:${ADMIN_BASE - 1}`;
  await sql.query(
    `INSERT INTO idempotency_records (scope_key, request_hash, status, resource_id, response_body, http_status,
       user_scope, operation, expires_at)
     SELECT $1 || ':users.create:' || md5(g::text), md5(g::text) || md5(g::text), 'SUCCEEDED', g::text, repeat('x', 600),
            201, $1, 'users.create', now() + interval '24 hours'
     FROM generate_series(1, $2::int) g`,
    [heavy, DEFAULT_MAX_RETAINED - 10],
  );
  // Counted on the user's slot row, as the engine's claims count them (idempotency/caps.ts).
  await sql.query(
    `INSERT INTO idempotency_slots (user_scope, slot, retained) VALUES ($1, 1, $2)
     ON CONFLICT (user_scope, slot) DO UPDATE SET retained = idempotency_slots.retained + EXCLUDED.retained`,
    [heavy, DEFAULT_MAX_RETAINED - 10],
  );
  // Statistics, no VACUUM: a busy user's records are recent, so not yet all-visible.
  await sql.query('ANALYZE idempotency_records');
  const explains = {
    claim: await explain(sql, claimSql(`${user}:users.create:explain-${runId}`, user, MAX_RETAINED), []),
    claimUserNearDefaultCap: await explain(
      sql,
      claimSql(`${heavy}:users.create:explain-${runId}`, heavy, DEFAULT_MAX_RETAINED),
      [],
    ),
    replayRead: await explain(sql, READ_RECORD_SQL, [
      `${TENANT}:${ADMIN_BASE + 1 + keys[0].admin}:users.create:${keys[0].key}`,
    ]),
  };
  // The claim's own cost for a user holding 9 990 keys against a user holding none (issue 12: the
  // retained cap counted in O(1)): server-side execution time of the same statement, interleaved,
  // each in a transaction rolled back, median of many.
  const fresh = `${TENANT}:fresh-${runId}`;
  await sql.query(
    `INSERT INTO idempotency_slots (user_scope, slot, retained) VALUES ($1, 1, 0) ON CONFLICT DO NOTHING`,
    [fresh],
  );
  const claimCost = await claimTimes(sql, { atZero: fresh, atCap: heavy }, P.claimSamples);
  results.claimCost = claimCost;
  const claimRatio = ratio(claimCost.atCap.median, claimCost.atZero.median);
  rows.push({
    id: 'claim-retained',
    scenario: `Claim at ${DEFAULT_MAX_RETAINED - 10} retained keys of one user ÷ at 0 (median of ${P.claimSamples} executions)`,
    value: `${r2(claimRatio)} (${claimCost.atCap.median.toFixed(3)} ÷ ${claimCost.atZero.median.toFixed(3)} ms)`,
    target: '≤ 1.10',
    pass: claimRatio <= 1.1,
  });
  log(`claim cost: ${JSON.stringify(claimCost)}`);

  const big = await phase('big');
  const drift = ratio(big.control.p50, small.control.p50);
  results.growth = { rows: { small: small.rows, big: big.rows }, controlDrift: drift, explain: explains };
  for (const kind of ['replay', 'create'] as const) {
    const raw = ratio(big[kind].p50, small[kind].p50);
    const v = raw / drift;
    rows.push(
      loadRow(
        `growth-${kind}`,
        `Growth ${kind}: p50 at ${rowsLabel(big.rows)} ÷ ${rowsLabel(small.rows)} rows`,
        big[kind],
        `${r2(v)} (raw ${r2(raw)}, control ${r2(drift)})`,
        '≤ 1.20',
        v <= 1.2,
      ),
    );
  }
}

/**
 * Execution time (ms, EXPLAIN ANALYZE without per-node timing) of the engine's claim statement for
 * each user, alternated, every one in its own transaction rolled back (nothing is kept).
 */
async function claimTimes(
  sql: pg.Pool,
  users: { atZero: string; atCap: string },
  samples: number,
): Promise<Record<'atZero' | 'atCap', { median: number; p90: number }>> {
  const c = await sql.connect();
  const times: Record<'atZero' | 'atCap', number[]> = { atZero: [], atCap: [] };
  try {
    for (let i = 0; i < samples; i++) {
      for (const which of ['atZero', 'atCap'] as const) {
        const user = users[which];
        await c.query('BEGIN');
        const r = await c.query(
          `EXPLAIN (ANALYZE, TIMING OFF, FORMAT JSON) ${claimSql(`${user}:users.create:claim-${i}`, user, DEFAULT_MAX_RETAINED)}`,
        );
        await c.query('ROLLBACK');
        const plan = r.rows[0]['QUERY PLAN'] as Array<{ 'Execution Time': number }>;
        times[which].push(plan[0]['Execution Time']);
      }
    }
  } finally {
    await c.query('ROLLBACK').catch(() => {});
    c.release();
  }
  const stats = (xs: number[]) => {
    const sorted = [...xs].sort((a, b) => a - b);
    return { median: sorted[Math.floor(sorted.length / 2)], p90: sorted[Math.floor(sorted.length * 0.9)] };
  };
  return { atZero: stats(times.atZero), atCap: stats(times.atCap) };
}

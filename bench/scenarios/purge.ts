import type { Sequelize } from 'sequelize';
import { DEFAULT_PURGE_BUSY_PERCENT } from '../../core/config.js';
import { createSequelize } from '../../core/database.js';
import { DELETE_RECORDS_PLAN, deleteRecordsStatement } from '../../idempotency/caps.js';
import { purgeExpired } from '../../idempotency/purge-expired.js';
import type { BenchRun } from '../bench-run.js';
import { count, explain, fill, loadRow, measure, rowsLabel, settle } from '../measure.js';
import { r2, ratio } from '../report.js';

export async function purgeScenario(ctx: BenchRun): Promise<void> {
  const { P, log, results, rows, idemUser } = ctx;
  const busyPercent = ctx.PURGE_BUSY_PERCENT ?? DEFAULT_PURGE_BUSY_PERCENT;
  const { sql, server, db } = ctx;
  await fill(ctx, sql, 'expired', P.purgeRows, '-1 hour');
  await settle(ctx, sql);
  const total = await count(sql, 'SELECT count(*) AS n FROM idempotency_records');
  const explainPurge = await explain(
    sql,
    deleteRecordsStatement(`r.expires_at < now() AND r.status <> 'PROCESSING'`, 500),
    [],
    DELETE_RECORDS_PLAN,
  );
  const quiet = await measure(ctx, 'purge-off', server.url, P.short, idemUser);
  // The engine's own purge, as the service's job runs it: the whole backlog, paced by time
  // (PURGE_BUSY_PERCENT), on a pool of its own.
  const sequelize: Sequelize = createSequelize(db.url, 2);
  const stop = new AbortController();
  const started = Date.now();
  let purgeSeconds = Number.NaN;
  let purged = 0;
  const purging = (async () => {
    try {
      purged = await purgeExpired(sequelize, {
        maxBatches: Number.POSITIVE_INFINITY,
        busyPercent,
        signal: stop.signal,
      });
      purgeSeconds = (Date.now() - started) / 1000;
    } finally {
      await sequelize.close();
    }
  })();
  log(`purge: deleting ${P.purgeRows} expired records (of ${total}) under load, busy ${busyPercent}%`);
  const during = await measure(ctx, 'purge-on', server.url, P.purgeMax, idemUser, { stopWhen: purging });
  stop.abort();
  await purging;
  const left = await count(
    sql,
    "SELECT count(*) AS n FROM idempotency_records WHERE expires_at < now() AND status <> 'PROCESSING'",
  );
  results.purge = {
    rowsInTable: total,
    purged,
    left,
    purgeSeconds,
    busyPercent,
    rowsPerSecond: purged / ((Date.now() - started) / 1000),
    off: quiet,
    on: during,
    explain: explainPurge,
  };
  log(`purge: ${purged} rows in ${purgeSeconds.toFixed(1)}s, ${left} left`);
  const v = ratio(during.p99, quiet.p99);
  const row = loadRow(
    'purge',
    `Purge ${rowsLabel(purged)} expired under create load: p99 ÷ p99 without`,
    during,
    r2(v),
    '≤ 1.30',
    v <= 1.3 && left === 0,
  );
  if (left > 0) row.value += ` (${left} not purged in ${P.purgeMax}s)`;
  rows.push(row);
}

import { setTimeout as sleep } from 'node:timers/promises';
import type { Sequelize } from 'sequelize';
import { createSequelize } from '../../core/database.js';
import { DELETE_RECORDS_PLAN, deleteRecordsStatement } from '../../idempotency/caps.js';
import { purgeExpired } from '../../idempotency/purge-expired.js';
import type { BenchRun } from '../bench-run.js';
import { count, explain, fill, loadRow, measure, rowsLabel, settle } from '../measure.js';
import { r2, ratio } from '../report.js';

export async function purgeScenario(ctx: BenchRun): Promise<void> {
  const { P, PURGE_PAUSE_MS, log, results, rows, idemUser } = ctx;
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
  // The engine's own purge function, back to back (a purge catching up), on its own connection.
  const sequelize: Sequelize = createSequelize(db.url, 2);
  let stop = false;
  let purged = 0;
  const started = Date.now();
  let purgeSeconds = Number.NaN;
  const purging = (async () => {
    try {
      while (!stop) {
        // purgeExpired's own loop runs its batches back to back; with --purge-pause-ms the
        // benchmark runs one batch at a time and pauses in between (a proposal, measured).
        const n = await purgeExpired(sequelize, 500, PURGE_PAUSE_MS > 0 ? 1 : 10);
        purged += n;
        if (n === 0) break;
        if (PURGE_PAUSE_MS > 0) await sleep(PURGE_PAUSE_MS);
      }
      purgeSeconds = (Date.now() - started) / 1000;
    } finally {
      await sequelize.close();
    }
  })();
  log(`purge: deleting ${P.purgeRows} expired records (of ${total}) under load`);
  const during = await measure(ctx, 'purge-on', server.url, P.purgeMax, idemUser, { stopWhen: purging });
  stop = true;
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

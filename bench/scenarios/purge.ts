import type { Sequelize } from 'sequelize';
import { DEFAULT_PURGE_BUSY_PERCENT } from '../../core/config.js';
import { createSequelize } from '../../core/database.js';
import { purgeExpiredEvents } from '../../events/feed.js';
import { DELETE_RECORDS_PLAN, deleteRecordsStatement } from '../../idempotency/caps.js';
import { purgeExpired } from '../../idempotency/purge-expired.js';
import type { BenchRun } from '../bench-run.js';
import type { LoadResult } from '../load.js';
import { combine, count, explain, fill, loadRow, measure, rowsLabel, settle } from '../measure.js';
import { r2, ratio } from '../report.js';

/**
 * A backlog of expired records purged under idempotent-create load, as the service's job purges it
 * (the whole backlog, paced by PURGE_BUSY_PERCENT, on a pool of its own). The control is measured in
 * between: segments without the purge alternate with segments with it (each "on" segment twice as
 * long as an "off" one), so both see the same table and the same moment of the run, and each p99 is
 * taken over all of its condition's answers.
 */
export async function purgeScenario(ctx: BenchRun): Promise<void> {
  const { P, log, results, rows, idemUser } = ctx;
  const busyPercent = ctx.PURGE_BUSY_PERCENT ?? DEFAULT_PURGE_BUSY_PERCENT;
  const { sql, server, db } = ctx;
  await fill(ctx, sql, 'expired', P.purgeRows, '-1 hour');
  await settle(ctx, sql);
  const total = await count(sql, 'SELECT count(*) AS n FROM idempotency_records');
  const explainPurge = await explain(
    sql,
    deleteRecordsStatement(`r.expires_at < now() AND r.status <> 'PROCESSING'`, 500, 30),
    [],
    DELETE_RECORDS_PLAN,
  );
  const sequelize: Sequelize = createSequelize(db.url, 2);
  const off: LoadResult[] = [];
  const on: LoadResult[] = [];
  let purged = 0;
  let purgingSeconds = 0;
  let done = false;
  const started = Date.now();
  log(`purge: deleting ${P.purgeRows} expired records (of ${total}) under load, busy ${busyPercent}%`);
  try {
    while (!done && (Date.now() - started) / 1000 < P.purgeMax) {
      off.push(await measure(ctx, 'purge-off', server.url, P.purgeSegment / 2, idemUser));
      const stop = new AbortController();
      const segmentStarted = Date.now();
      const purging = purgeExpired(sequelize, {
        maxBatches: Number.POSITIVE_INFINITY,
        busyPercent,
        signal: stop.signal,
      }).then((n) => {
        purged += n;
        // Returned by itself (not stopped): the backlog is gone.
        done = !stop.signal.aborted;
      });
      on.push(await measure(ctx, 'purge-on', server.url, P.purgeSegment, idemUser, { stopWhen: purging }));
      stop.abort();
      await purging;
      purgingSeconds += (Date.now() - segmentStarted) / 1000;
    }
  } finally {
    await sequelize.close();
  }
  const quiet = combine(off);
  const during = combine(on);
  results['purge-off'] = quiet;
  results['purge-on'] = during;
  const left = await count(
    sql,
    "SELECT count(*) AS n FROM idempotency_records WHERE expires_at < now() AND status <> 'PROCESSING'",
  );
  // Each purged record leaves a tombstone (written by the same batch, so its cost is in the figures
  // above); their size is reported per tombstone.
  const tombstones = await count(sql, 'SELECT count(*) AS n FROM idempotency_tombstones');
  const tombstoneBytes = await count(sql, "SELECT pg_total_relation_size('idempotency_tombstones') AS n");
  results.purge = {
    rowsInTable: total,
    tombstones,
    bytesPerTombstone: tombstones > 0 ? tombstoneBytes / tombstones : null,
    purged,
    left,
    purgingSeconds,
    busyPercent,
    rowsPerPurgingSecond: purged / purgingSeconds,
    off: quiet,
    on: during,
    explain: explainPurge,
  };
  log(
    `purge: ${purged} rows in ${purgingSeconds.toFixed(1)}s of purging (${on.length} segments, ${off.length} without), ${left} left; p99 ${during.p99.toFixed(1)} ms with, ${quiet.p99.toFixed(1)} ms without`,
  );
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

/**
 * The outbox's growth and its retention (issue 28): the events the run wrote so far (every order,
 * payment and refund of the scenarios before), their size per event, and the retention's purge of
 * all of them (purgeExpiredEvents with a retention of 0 days: every committed event is past it) as
 * the service's job runs it (batches of 5,000, paced by PURGE_BUSY_PERCENT), under keyed order
 * creates; p99 with the purge running against a segment without it, and the events that segment
 * wrote. New events written meanwhile are purged too.
 */
export async function eventsPurgeScenario(ctx: BenchRun): Promise<void> {
  const { P, log, results, rows, idemOrder, sql, server, db } = ctx;
  const busyPercent = ctx.PURGE_BUSY_PERCENT ?? DEFAULT_PURGE_BUSY_PERCENT;
  const quiet = await measure(ctx, 'events-purge-off', server.url, P.purgeSegment / 2, idemOrder);
  // Counted after the segment without the purge: its orders' events are purged too (in a run of
  // `--only=purge` they are all there is).
  const total = await count(sql, 'SELECT count(*) AS n FROM events');
  const bytes = await count(sql, "SELECT pg_total_relation_size('events') AS n");
  const sequelize: Sequelize = createSequelize(db.url, 2);
  let purged = 0;
  let purgingSeconds = 0;
  try {
    const started = Date.now();
    const purging = (async () => {
      // The service job's run (paced by PURGE_BUSY_PERCENT), bounded by the scenario's time.
      purged = await purgeExpiredEvents(sequelize, 0, {
        busyPercent,
        signal: AbortSignal.timeout(P.purgeMax * 1000),
      });
      purgingSeconds = (Date.now() - started) / 1000;
    })();
    const during = await measure(ctx, 'events-purge-on', server.url, P.purgeMax, idemOrder, {
      stopWhen: purging,
    });
    await purging;
    const left = await count(sql, 'SELECT count(*) AS n FROM events');
    results.eventsPurge = {
      eventsBefore: total,
      bytesPerEvent: total > 0 ? bytes / total : null,
      purged,
      purgingSeconds,
      eventsPerSecond: purged / purgingSeconds,
      left,
      off: quiet,
      on: during,
    };
    log(
      `events purge: ${purged} of ${total} events (${(bytes / Math.max(1, total)).toFixed(0)} bytes each) in ${purgingSeconds.toFixed(1)}s; p99 ${during.p99.toFixed(1)} ms with, ${quiet.p99.toFixed(1)} ms without; ${left} left`,
    );
    const v = ratio(during.p99, quiet.p99);
    rows.push(
      loadRow(
        'events-purge',
        `Outbox retention: purge ${rowsLabel(purged)} events (${(bytes / Math.max(1, total)).toFixed(0)} B each, ${(purged / purgingSeconds).toFixed(0)}/s) under create load: p99 ÷ without`,
        during,
        r2(v),
        '≤ 1.30',
        v <= 1.3,
      ),
    );
  } finally {
    await sequelize.close();
  }
}

import type { Logger } from 'pino';
import type { Sequelize } from 'sequelize';
import type { Config } from '../core/config.js';
import type { Jobs } from '../core/jobs.js';
import { sqlRows } from '../core/sql.js';
import { runExport } from '../routers/exports/export-run.js';
import { every, type PauseLog } from './background.js';
import { PURGE_EXPIRE_MS } from './jobs.js';

export const EXPORT_QUEUE = 'export-run';
/**
 * pg-boss takes a run as its worker's death only after this; an export outlives a minute easily, and
 * a dead worker's export is found sooner by the sweep (its lease ended), so this is only a backstop.
 */
const EXPORT_EXPIRE_MS = 60 * 60_000;
const SWEEP_EXPIRE_MS = 60_000;
/** Parts of expired exports deleted per statement (a part is up to a few MB). */
const PURGE_BATCH = 50;

/**
 * Exports on the job runner (docs/JOBS.md): one job per export (jobKey = its id, one pending at a
 * time), added after the POST's commit; a sweep that adds it again for every PROCESSING export whose
 * lease is free (never taken: the add after the commit was lost to a crash; or expired: its worker
 * died), so an export is always continued; and the purge of expired files. Returns the queue the
 * POST adds to.
 */
export async function startExportWork(deps: {
  jobs: Jobs;
  pauses: PauseLog;
  config: Config;
  sequelize: Sequelize;
  logger: Logger;
}): Promise<{ enqueue(id: string): Promise<unknown> }> {
  const { jobs, pauses, config, sequelize, logger } = deps;
  const work = {
    sequelize,
    leaseMs: config.IDEMPOTENCY_LEASE_MS,
    maxRows: config.EXPORT_MAX_ROWS,
    ttlHours: config.EXPORT_TTL_HOURS,
  };
  const enqueue = (id: string) => jobs.add(EXPORT_QUEUE, { id }, { jobKey: id });
  await jobs.task<{ id: string }>(
    EXPORT_QUEUE,
    async ({ id }, { signal }) => {
      const result = await runExport(work, id, signal);
      if (result === 'fenced') logger.warn({ exportId: id }, 'export taken over by another worker; stopped');
      else if (result === 'succeeded' || result === 'failed')
        logger.info({ exportId: id, result }, 'export done');
    },
    { expireInMs: EXPORT_EXPIRE_MS, unique: 'pending' },
  );
  await every(
    jobs,
    pauses,
    'export-sweep',
    { intervalMs: config.RECOVERER_INTERVAL_MS, expireInMs: SWEEP_EXPIRE_MS },
    async () => {
      const free = await sqlRows<{ id: string }>(
        sequelize,
        `SELECT id::text AS id FROM exports
          WHERE status = 'PROCESSING' AND (lease_until IS NULL OR lease_until < now()) ORDER BY id LIMIT 100`,
      );
      // A job already pending for one is kept (the add is then a no-op).
      for (const { id } of free) await enqueue(id);
    },
  );
  await every(
    jobs,
    pauses,
    'export-purge',
    { intervalMs: config.PURGE_INTERVAL_MS, expireInMs: PURGE_EXPIRE_MS },
    async (signal) => {
      const purged = await purgeExpiredExportParts(sequelize, signal);
      if (purged > 0) logger.info({ parts: purged }, 'expired export files purged');
    },
  );
  return { enqueue };
}

/** Deletes the parts (the files) of expired exports, in small batches; the exports rows stay. */
export async function purgeExpiredExportParts(sequelize: Sequelize, signal: AbortSignal): Promise<number> {
  let purged = 0;
  for (;;) {
    const rows = await sqlRows(
      sequelize,
      `DELETE FROM export_parts WHERE (export_id, part_no) IN (
         SELECT p.export_id, p.part_no FROM exports e JOIN export_parts p ON p.export_id = e.id
          WHERE e.expires_at < now() LIMIT ${PURGE_BATCH}) RETURNING 1`,
    );
    purged += rows.length;
    if (rows.length < PURGE_BATCH || signal.aborted) return purged;
  }
}

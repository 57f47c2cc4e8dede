import type { Logger } from 'pino';
import type { Sequelize } from 'sequelize';
import type { Config } from '../core/config.js';
import type { Jobs } from '../core/jobs.js';
import { sqlRows } from '../core/sql.js';
import {
  type BackgroundDeps,
  freeRows,
  registeredBackgroundEffects,
  runBackground,
} from '../idempotency/effect-background.js';
import type { ExportWork } from '../routers/exports/export-run.js';
import { every, type PauseLog } from './background.js';
import { PURGE_EXPIRE_MS } from './jobs.js';

/**
 * pg-boss takes a run as its worker's death only after this; an export outlives a minute easily, and
 * a dead worker's row is found sooner by the recoverer's sweep (its lease ended), so this is only a
 * backstop.
 */
const RUN_EXPIRE_MS = 60 * 60_000;
/** Parts of expired exports deleted per statement (a part is up to a few MB). */
const PURGE_BATCH = 50;

/** Adds the job that runs (or continues) one row of a background effect. */
export interface BackgroundQueue {
  enqueue(effect: string, id: string): Promise<unknown>;
}

/** What every background effect's steps use: one object serves them all (exports read theirs). */
export const backgroundDeps = (config: Config, sequelize: Sequelize): ExportWork & BackgroundDeps => ({
  sequelize,
  leaseMs: config.IDEMPOTENCY_LEASE_MS,
  maxRows: config.EXPORT_MAX_ROWS,
  ttlHours: config.EXPORT_TTL_HOURS,
  busyPercent: config.EXPORT_BUSY_PERCENT,
});

/**
 * Every registered background effect (idempotency/effect-background.ts; today exports) on the job runner (docs/JOBS.md): one queue each, one job per row (jobKey = its
 * id, one pending at a time), added after the request's commit and by the recoverer's sweep
 * (`sweepBackground`) for a row whose lease is free, so a row is always continued.
 */
export async function startBackgroundEffects(
  jobs: Jobs,
  deps: BackgroundDeps,
  logger: Logger,
): Promise<BackgroundQueue> {
  for (const effect of registeredBackgroundEffects()) {
    await jobs.task<{ id: string }>(
      effect.name,
      async ({ id }, { signal }) => {
        const result = await runBackground(effect, deps, id, signal);
        if (result === 'fenced')
          logger.warn({ effect: effect.name, id }, 'taken over by another worker; stopped');
        else if (result === 'succeeded' || result === 'failed')
          logger.info({ effect: effect.name, id, result }, 'done');
      },
      { expireInMs: RUN_EXPIRE_MS, unique: 'pending' },
    );
  }
  return { enqueue: (effect, id) => jobs.add(effect, { id }, { jobKey: id }) };
}

/**
 * The recoverer's round for background effects: a job added for every PROCESSING row whose lease is
 * free (never taken: the add after the commit was lost to a crash; or expired: its worker died). A
 * job already pending for one is kept (the add is then a no-op). Returns how many rows it found.
 */
export async function sweepBackground(queue: BackgroundQueue, sequelize: Sequelize): Promise<number> {
  let found = 0;
  for (const effect of registeredBackgroundEffects()) {
    const ids = await freeRows(effect, sequelize);
    for (const id of ids) await queue.enqueue(effect.name, id);
    found += ids.length;
  }
  return found;
}

/** The purge of expired export files, every PURGE_INTERVAL_MS on any instance. */
export function startExportPurge(
  jobs: Jobs,
  pauses: PauseLog,
  config: Config,
  sequelize: Sequelize,
  logger: Logger,
) {
  return every(
    jobs,
    pauses,
    'export-purge',
    { intervalMs: config.PURGE_INTERVAL_MS, expireInMs: PURGE_EXPIRE_MS },
    async (signal) => {
      const purged = await purgeExpiredExportParts(sequelize, signal);
      if (purged > 0) logger.info({ parts: purged }, 'expired export files purged');
    },
  );
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

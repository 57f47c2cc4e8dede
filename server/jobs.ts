import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from 'pino';
import { applicationName } from '../core/database.js';
import { isDatabaseBusy, isDatabaseUnavailable } from '../core/db-errors.js';
import { Jobs } from '../core/jobs.js';

/**
 * How long a run may take before its instance is taken as dead and the run is done again elsewhere
 * (pg-boss's expireIn, found at the next maintenance round). A recoverer run takes a batch of 20
 * leases: a minute means its instance died, and the sweep must not stop for longer. A purge run
 * works off the whole backlog, paced, so it may run long; one outliving this runs again alongside.
 */
export const RECOVERER_EXPIRE_MS = 60_000;
export const PURGE_EXPIRE_MS = 10 * 60_000;
const MAINTENANCE_MS = 10_000;

/**
 * How soon a job added for now (an export's run) starts: its queue's poll. Recurring queues poll by
 * their own interval (server/background.ts recurringPollMs).
 */
const JOB_POLL_MS = 500;

/**
 * The job runner of this instance, its schema created or upgraded (pg-boss's own migrations, under
 * pg-boss's advisory lock), after ours.
 */
export async function startJobs(url: string, logger: Logger): Promise<Jobs> {
  const jobs = new Jobs({
    connectionString: url,
    applicationName: applicationName(),
    logger,
    pollMs: JOB_POLL_MS,
    maintenanceMs: MAINTENANCE_MS,
    onError: (err) =>
      // A failover: each maintenance round would say so; the jobs' own pause lines are enough.
      isDatabaseUnavailable(err)
        ? logger.debug({ err }, 'job runner: database unavailable')
        : logger.warn({ err }, 'job runner error'),
  });
  await jobs.start();
  return jobs;
}

/**
 * Runs `setup` (the job runner's schema, queues and first runs), again when the database refused it
 * for a lock: a deadlock's victim, or a lock wait past the role's `lock_timeout` (the wait bound, 1 s
 * by default, that deploy/ha's role carries); everything of that attempt was rolled back, and `setup`
 * stops what it started before it fails. Instances starting together meet both in pg-boss's queue
 * creation (each queue is a partition attached to pg-boss's job table while another instance sends
 * into it, or creates the same queue); every step of the set-up is idempotent (queues and the first
 * runs are created once, whoever gets there first). A lock held across the set-up was tried instead: it needs
 * a second server connection, which a PgBouncer pool of one does not have.
 */
export async function settingUpJobs<T>(setup: () => Promise<T>, withinMs = 60_000): Promise<T> {
  // As long as start-up waits for a database (DB_STARTUP_TIMEOUT_MS's default): another instance
  // creating pg-boss's schema over a synchronously replicated cluster holds its locks for seconds.
  const deadline = Date.now() + withinMs;
  for (let attempt = 1; ; attempt++) {
    try {
      return await setup();
    } catch (err) {
      if (Date.now() >= deadline || !isDatabaseBusy(err)) throw err;
      await sleep(50 + Math.random() * Math.min(1000, 100 * attempt));
    }
  }
}

import pg from 'pg';
import type { Logger } from 'pino';
import type { Config } from '../core/config.js';
import { applicationName } from '../core/database.js';
import { isDatabaseUnavailable } from '../core/db-errors.js';
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
 * The job runner of this instance, its schema created or upgraded (pg-boss's own migrations, under
 * pg-boss's advisory lock), after ours. Polls at most every second so short intervals stay short.
 */
export async function startJobs(config: Config, url: string, logger: Logger): Promise<Jobs> {
  const jobs = new Jobs({
    connectionString: url,
    applicationName: applicationName(),
    logger,
    pollMs: Math.min(1000, config.RECOVERER_INTERVAL_MS, config.PURGE_INTERVAL_MS),
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

// Any constant works; it only has to be the same in every instance (and differ from the migrations').
const JOBS_SETUP_LOCK = 727_002;

/**
 * Runs `setup` while this instance holds the jobs' set-up lock: a transaction-level advisory lock on
 * a connection of its own, held open until `setup` ends (transaction-level, so a pooler in
 * transaction mode keeps it on one server connection; never a session lock). Instances starting
 * together wait here one after another; the wait is start-up's, not a request's (no lock_timeout).
 * If `setup` fails, or stops the instance, the lock ends with the transaction or the connection.
 */
export async function oneStarterAtATime<T>(url: string, setup: () => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url, application_name: applicationName() });
  await client.connect();
  try {
    await client.query('BEGIN');
    await client.query("SET LOCAL lock_timeout = '0'");
    await client.query('SELECT pg_advisory_xact_lock($1)', [JOBS_SETUP_LOCK]);
    try {
      return await setup();
    } finally {
      // A connection ended meanwhile (an idle-in-transaction time-out) released the lock already.
      await client.query('COMMIT').catch(() => {});
    }
  } finally {
    await client.end().catch(() => {});
  }
}

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

import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from 'pino';
import { isDatabaseUnavailable } from '../core/db-errors.js';
import type { Jobs } from '../core/jobs.js';

/**
 * While the database is unavailable (a failover, a restart) a job pauses: it says so once, keeps
 * trying without a warning per run (the task's or the runner's own polls), and says when it resumed.
 */
export class PauseLog {
  private readonly pausedSince = new Map<string, number>();

  constructor(private readonly logger: Logger) {}

  succeeded(job: string): void {
    const since = this.pausedSince.get(job);
    if (since === undefined) return;
    this.pausedSince.delete(job);
    this.logger.info({ job, pausedMs: Date.now() - since }, 'background job resumed');
  }

  failed(job: string, err: unknown): void {
    if (!isDatabaseUnavailable(err)) {
      this.logger.warn({ err, job }, 'background job failed');
      return;
    }
    if (this.pausedSince.has(job)) return;
    this.pausedSince.set(job, Date.now());
    this.logger.warn({ err, job }, 'background job paused: the database is unavailable');
  }
}

export interface RecurringOptions {
  intervalMs: number;
  /** A run still going after this is taken as its worker's death: pg-boss runs the job again. */
  expireInMs: number;
}

/**
 * The poll of a recurring queue: a quarter of its interval, from 500 ms (pg-boss's least) to 5 s. The
 * pause between two runs is the interval plus up to one poll: up to 1.25 s more on the recoverer's 5 s,
 * 5 s more on a 60 s purge. Every poll is a query on every instance, due or not: with one 500 ms poll for all
 * queues, an idle instance sent 16 statements a second, 9 with these (docs/JOBS.md).
 */
export function recurringPollMs(intervalMs: number): number {
  return Math.min(5000, Math.max(500, Math.round(intervalMs / 4)));
}

// A recurring job is retried only when its worker died (its own errors are caught and logged).
const RECURRING_ATTEMPTS = 1_000_000;

/**
 * Runs `task` about every `intervalMs` on ANY instance, one run at a time across instances: one
 * pending job per queue (unique 'pending', jobKey = queue) that reschedules itself when its run
 * ends, so the next run exists only once this one ended. Every instance adds the first one at start
 * (all adds but one are no-ops); only that seed can overlap a run in progress (an instance started
 * during a run longer than the interval), and a run outliving expireInMs (its instance taken as
 * dead) is run again: both are safe, the tasks are written to run concurrently.
 * The queue's name carries the interval, so instances configured alike share one chain, and an
 * instance configured apart (a test's "recoverer off" instance) neither runs nor delays the others'.
 */
export async function every(
  jobs: Jobs,
  pauses: PauseLog,
  name: string,
  options: RecurringOptions,
  task: (signal: AbortSignal) => Promise<unknown>,
): Promise<void> {
  const queue = `${name}-every-${options.intervalMs}ms`;
  const next = () =>
    jobs.add(queue, null, {
      delayMs: options.intervalMs,
      jobKey: queue,
      maxAttempts: RECURRING_ATTEMPTS,
    });
  await jobs.task<null>(
    queue,
    async (_payload, { signal }) => {
      for (;;) {
        try {
          await task(signal);
          pauses.succeeded(name);
        } catch (err) {
          pauses.failed(name, err);
        }
        try {
          // Also at shutdown: the next run is then another instance's (or this one's after a restart).
          return void (await next());
        } catch (err) {
          // The database went away before the next run was saved: without it the chain would end
          // (until the job expired), so this run keeps ticking here until the database is back.
          pauses.failed(name, err);
          if (signal.aborted) throw err;
          await sleep(options.intervalMs, undefined, { signal }).catch(() => {});
        }
      }
    },
    // Not 'pending-and-running': a run whose instance died would block the next until it expired.
    { unique: 'pending', expireInMs: options.expireInMs, pollMs: recurringPollMs(options.intervalMs) },
  );
  await next();
}

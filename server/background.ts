import type { Logger } from 'pino';
import { isDatabaseUnavailable } from '../core/db-errors.js';

export interface BackgroundJob {
  stop(): Promise<void>;
}

/**
 * Runs `task` every `intervalMs` (never overlapping itself); stop() aborts the signal it gave the
 * task (a long run ends at its next step) and waits for a run in progress.
 * Safe in every instance at once: each task is written to be run concurrently.
 * While the database is unavailable (a failover, a restart) the job pauses: it says so once, keeps
 * trying each interval without a warning per run, and says when it resumed.
 */
export function every(
  name: string,
  intervalMs: number,
  logger: Logger,
  task: (signal: AbortSignal) => Promise<unknown>,
): BackgroundJob {
  let running: Promise<void> | undefined;
  let stopped = false;
  let pausedSince: number | undefined;
  const stopping = new AbortController();
  const timer = setInterval(() => {
    if (running || stopped) return;
    running = task(stopping.signal)
      .then(
        () => {
          if (pausedSince === undefined) return;
          logger.info({ job: name, pausedMs: Date.now() - pausedSince }, 'background job resumed');
          pausedSince = undefined;
        },
        (err: unknown) => {
          if (!isDatabaseUnavailable(err)) return logger.warn({ err, job: name }, 'background job failed');
          if (pausedSince !== undefined) return;
          pausedSince = Date.now();
          logger.warn({ err, job: name }, 'background job paused: the database is unavailable');
        },
      )
      .finally(() => {
        running = undefined;
      });
  }, intervalMs);
  timer.unref();
  return {
    async stop() {
      stopped = true;
      clearInterval(timer);
      stopping.abort();
      await running;
    },
  };
}

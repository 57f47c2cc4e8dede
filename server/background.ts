import type { Logger } from 'pino';

export interface BackgroundJob {
  stop(): Promise<void>;
}

/**
 * Runs `task` every `intervalMs` (never overlapping itself); stop() waits for a run in progress.
 * Safe in every instance at once: each task is written to be run concurrently.
 */
export function every(
  name: string,
  intervalMs: number,
  logger: Logger,
  task: () => Promise<unknown>,
): BackgroundJob {
  let running: Promise<void> | undefined;
  let stopped = false;
  const timer = setInterval(() => {
    if (running || stopped) return;
    running = task()
      .then(
        () => {},
        (err: unknown) => logger.warn({ err, job: name }, 'background job failed'),
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
      await running;
    },
  };
}

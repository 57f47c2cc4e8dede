import { setTimeout as sleep } from 'node:timers/promises';

/**
 * Pacing by time for background work that shares the machine with requests (the purge, exports):
 * after a step that took `busyMs`, pause so that working takes `busyPercent` of wall time.
 */
export function pauseAfterBatch(busyMs: number, busyPercent: number): number {
  if (!(busyPercent > 0 && busyPercent <= 100)) throw new RangeError('busyPercent must be in (0, 100]');
  return (busyMs * (100 - busyPercent)) / busyPercent;
}

/** How a pause is waited: a timer that resolves early (never rejects) when `signal` aborts. */
export type Wait = (ms: number, signal?: AbortSignal) => Promise<void>;

export const timerWait: Wait = (ms, signal) => sleep(ms, undefined, { signal }).catch(() => undefined);

import { setTimeout as sleep } from 'node:timers/promises';

/**
 * Pacing by time for background work that shares the machine with requests (the purges, exports):
 * after a step that took `busyMs`, pause so that working takes `busyPercent` of wall time.
 */
export function pauseAfterBatch(busyMs: number, busyPercent: number): number {
  if (!(busyPercent > 0 && busyPercent <= 100)) throw new RangeError('busyPercent must be in (0, 100]');
  return (busyMs * (100 - busyPercent)) / busyPercent;
}

/** How a pause is waited: a timer that resolves early (never rejects) when `signal` aborts. */
export type Wait = (ms: number, signal?: AbortSignal) => Promise<void>;

export const timerWait: Wait = (ms, signal) => sleep(ms, undefined, { signal }).catch(() => undefined);

export interface PacedBatches {
  /** A batch that handles fewer than this is the last one. */
  batchSize: number;
  /** Batches per call at most. */
  maxBatches?: number;
  /** The share of wall time spent in batches (pauseAfterBatch); 100: back to back. */
  busyPercent?: number;
  /** Ends the run between batches (and cuts a pause short): shutdown. */
  signal?: AbortSignal;
  /** Told each batch's count as it commits. */
  onBatch?: (n: number) => void;
  /** How a pause is waited (a timer; tests pass their own). */
  wait?: Wait;
}

/**
 * Runs `batch` until it handles fewer than `batchSize` (or `maxBatches`, or the signal), pausing after
 * each full one so that the batches take `busyPercent` of wall time. Returns the total handled.
 */
export async function pacedBatches(options: PacedBatches, batch: () => Promise<number>): Promise<number> {
  const { batchSize, maxBatches = 100, busyPercent = 100, signal, onBatch, wait = timerWait } = options;
  let total = 0;
  for (let i = 0; i < maxBatches && !signal?.aborted; i++) {
    const started = performance.now();
    const n = await batch();
    total += n;
    if (n > 0) onBatch?.(n);
    if (n < batchSize) break;
    const pause = pauseAfterBatch(performance.now() - started, busyPercent);
    if (pause > 0) await wait(pause, signal);
  }
  return total;
}

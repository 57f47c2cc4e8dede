/** The waits before attempts 2..6 (CONTRACT section 12); every later attempt waits an hour. */
const BASE_DELAYS_MS = [5_000, 30_000, 120_000, 600_000, 1_800_000];
const HOURLY_MS = 3_600_000;

/** Each wait is its base ±20 %: receivers that failed together are not all retried in the same second. */
export const JITTER = 0.2;

/**
 * The wait before the next attempt of a delivery whose `attempt`-th attempt (1-based) just failed,
 * or null when that was the last one (`maxAttempts`, WEBHOOK_MAX_ATTEMPTS): the delivery is FAILED.
 * `random` is in [0, 1) (Math.random() in production, fixed in tests), so the function is pure.
 */
export function nextAttemptDelayMs(attempt: number, random: number, maxAttempts = 12): number | null {
  if (!Number.isInteger(attempt) || attempt < 1)
    throw new RangeError(`attempt must be an integer >= 1, got ${attempt}`);
  if (!(random >= 0 && random < 1)) throw new RangeError(`random must be in [0, 1), got ${random}`);
  if (attempt >= maxAttempts) return null;
  const base = BASE_DELAYS_MS[attempt - 1] ?? HOURLY_MS;
  return Math.round(base * (1 - JITTER + 2 * JITTER * random));
}

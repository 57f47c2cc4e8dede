import { expect } from 'chai';
import { JITTER, nextAttemptDelayMs } from '../../events/retry-schedule.js';

describe('webhook retry schedule (CONTRACT section 12)', () => {
  it('with no jitter (random 0.5), the waits are 5 s, 30 s, 2 min, 10 min, 30 min, then hourly', () => {
    const waits = [1, 2, 3, 4, 5, 6, 7, 11].map((attempt) => nextAttemptDelayMs(attempt, 0.5, 12));
    expect(waits).to.deep.equal([
      5_000, 30_000, 120_000, 600_000, 1_800_000, 3_600_000, 3_600_000, 3_600_000,
    ]);
  });

  it('the jitter keeps every wait within ±20 % of its base, at both ends of random', () => {
    expect(JITTER).to.equal(0.2);
    expect(nextAttemptDelayMs(1, 0, 12)).to.equal(4_000);
    expect(nextAttemptDelayMs(1, 0.999999, 12)).to.be.within(5_999, 6_000);
    for (let attempt = 1; attempt < 12; attempt++) {
      const low = nextAttemptDelayMs(attempt, 0, 12) as number;
      const high = nextAttemptDelayMs(attempt, 0.999999, 12) as number;
      const base = nextAttemptDelayMs(attempt, 0.5, 12) as number;
      expect(low, `attempt ${attempt}`).to.equal(Math.round(base * 0.8));
      expect(high, `attempt ${attempt}`).to.be.within(base * 1.2 - 1, base * 1.2);
    }
  });

  it('after attempt WEBHOOK_MAX_ATTEMPTS there is no next attempt (FAILED)', () => {
    expect(nextAttemptDelayMs(11, 0.5, 12)).to.equal(3_600_000);
    expect(nextAttemptDelayMs(12, 0.5, 12)).to.equal(null);
    expect(nextAttemptDelayMs(13, 0.5, 12)).to.equal(null);
    expect(nextAttemptDelayMs(1, 0.5, 1)).to.equal(null);
  });

  it('refuses an attempt below 1 or a random outside [0, 1)', () => {
    expect(() => nextAttemptDelayMs(0, 0.5)).to.throw(RangeError);
    expect(() => nextAttemptDelayMs(1.5, 0.5)).to.throw(RangeError);
    expect(() => nextAttemptDelayMs(1, 1)).to.throw(RangeError);
    expect(() => nextAttemptDelayMs(1, Number.NaN)).to.throw(RangeError);
  });
});

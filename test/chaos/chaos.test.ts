import { expect } from 'chai';
import { runChaos } from './driver.js';
import { scratchDatabase } from './scratch-database.js';

/**
 * The bounded slice of `npm run chaos` in the suite: two fixed seeds, 12 s of faults each. A failure
 * prints the invariant, the seed and the history slice; `npm run chaos -- --seed S` replays the
 * same schedule.
 */
describe('chaos: randomized fault schedules checked against the protocol model (fixed seeds)', function () {
  this.timeout(180000);
  for (const seed of [11, 12]) {
    it(`when seed ${seed}'s schedule of kills, stops, gateway faults and dropped connections runs over 3 instances, then no invariant is violated`, async () => {
      const server = process.env.TEST_DATABASE_URL;
      if (!server) throw new Error('TEST_DATABASE_URL is not set: the mocha root hooks did not run');
      const db = await scratchDatabase(server, `chaos_test_${seed}_${process.pid}`);
      try {
        const report = await runChaos({ seed, durationMs: 12000, databaseUrl: db.url });
        const first = report.result.violations[0];
        expect(report.requests, 'the clients ran').to.be.greaterThan(100);
        expect(
          first ? `${first.message}\n${first.slice.map((e) => JSON.stringify(e)).join('\n')}` : 'none',
          `seed ${seed}: schedule ${report.schedule.join('; ')}`,
        ).to.equal('none');
      } finally {
        await db.drop();
      }
    });
  }
});

import { expect } from 'chai';
import { runChaos } from './driver.js';
import { describeFault, drawSchedule } from './schedule.js';
import { scratchDatabase } from './scratch-database.js';

/**
 * The bounded slice of `npm run chaos` in the suite: three fixed seeds, 12 s of faults each (seed 25
 * draws a gateway that ignores the Idempotency-Key, so the run ends with reconcile's refunds). A
 * failure prints the invariant, the seed, the schedule as drawn and the history slice;
 * `npm run chaos -- --seed S --seeds 1 --minutes 0.2` injects the same schedule again.
 */
describe('chaos: randomized fault schedules checked against the protocol model (fixed seeds)', function () {
  this.timeout(180000);
  for (const seed of [11, 12, 25]) {
    it(`when seed ${seed}'s drawn schedule of faults runs over 3 instances, then no invariant is violated`, async () => {
      const server = process.env.TEST_DATABASE_URL;
      if (!server) throw new Error('TEST_DATABASE_URL is not set: the mocha root hooks did not run');
      const db = await scratchDatabase(server, `chaos_test_${seed}_${process.pid}`);
      try {
        const report = await runChaos({ seed, durationMs: 12000, databaseUrl: db.url });
        const first = report.result.violations[0];
        expect(report.requests, 'the clients ran').to.be.greaterThan(100);
        expect(report.result.checked['one-event-per-change'], 'the outbox was checked').to.be.greaterThan(
          100,
        );
        expect(report.final.refunds.length, 'the clients made refunds').to.be.greaterThan(0);
        expect(
          report.result.checked['no-outcome-after-503'],
          'the outcomes were timed (events carry their time)',
        ).to.be.greaterThan(0);
        expect(
          report.result.checked['export-file-equals-query'],
          'export files were checked',
        ).to.be.greaterThan(0);
        expect(report.schedule).to.deep.equal(drawSchedule(seed, 12000, { instances: 3 }).map(describeFault));
        if (report.drawn.some((f) => f.kind === 'gateway-ignore-key'))
          expect(report.reconcile, 'reconcile --repair ran').to.match(/^exit 0/);
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

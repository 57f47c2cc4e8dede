import { expect } from 'chai';
import { settingUpJobs } from '../../server/jobs.js';

const deadlock = () => Object.assign(new Error('deadlock detected'), { code: '40P01' });

describe('start-up: the job set-up again after a deadlock or a lock time-out', () => {
  it('when the set-up is a deadlock victim, then waits past the lock bound, then it runs a third time and its result is returned', async () => {
    let calls = 0;
    const result = await settingUpJobs(async () => {
      calls += 1;
      if (calls === 1) throw deadlock();
      if (calls === 2)
        throw Object.assign(new Error('canceling statement due to lock timeout'), { code: '55P03' });
      return 'ready';
    });
    expect(result).to.equal('ready');
    expect(calls).to.equal(3);
  });

  it('when the set-up fails otherwise, or deadlocks until its time is up, then the error is thrown (no endless retry)', async () => {
    let calls = 0;
    const other = await settingUpJobs(async () => {
      calls += 1;
      throw new Error('connection refused');
    }).catch((err: Error) => err.message);
    expect(other).to.equal('connection refused');
    expect(calls).to.equal(1);
    calls = 0;
    const always = await settingUpJobs(async () => {
      calls += 1;
      throw deadlock();
    }, 300).catch((err: Error) => err.message);
    expect(always).to.equal('deadlock detected');
    expect(calls).to.be.greaterThan(1);
  });
});

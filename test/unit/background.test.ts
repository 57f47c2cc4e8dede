import { Writable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import { expect } from 'chai';
import pino from 'pino';
import { every } from '../../server/background.js';

/** A logger whose lines the test reads. */
function capture() {
  const lines: Array<{ msg: string; job?: string; level: number }> = [];
  const stream = new Writable({
    write(chunk, _enc, done) {
      lines.push(JSON.parse(String(chunk)));
      done();
    },
  });
  return { logger: pino({ level: 'info' }, stream), lines };
}

const unavailable = () =>
  Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:6432'), { code: 'ECONNREFUSED' });

describe('background jobs: pause while the database is unavailable, resume after', () => {
  it('when a job meets a failover (several runs in a row fail with a connection error), then it logs one "paused", keeps running, and logs "resumed" once a run succeeds', async () => {
    const { logger, lines } = capture();
    let runs = 0;
    const job = every('test-job', 5, logger, async () => {
      runs++;
      if (runs <= 4) throw unavailable();
    });
    const deadline = Date.now() + 5000;
    while (runs < 6 && Date.now() < deadline) await sleep(5);
    await job.stop();
    const said = lines.filter((l) => l.job === 'test-job').map((l) => l.msg);
    expect(said).to.deep.equal([
      'background job paused: the database is unavailable',
      'background job resumed',
    ]);
  });

  it('when a job fails for another reason, then each failure is a warning of its own (not a pause)', async () => {
    const { logger, lines } = capture();
    let runs = 0;
    const job = every('other-job', 5, logger, async () => {
      runs++;
      throw new Error('a bug');
    });
    const deadline = Date.now() + 5000;
    while (runs < 3 && Date.now() < deadline) await sleep(5);
    await job.stop();
    const said = lines.filter((l) => l.job === 'other-job').map((l) => l.msg);
    expect(said.length).to.be.at.least(3);
    expect(new Set(said)).to.deep.equal(new Set(['background job failed']));
  });
});

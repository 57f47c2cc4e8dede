import { Writable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import { expect } from 'chai';
import pino from 'pino';
import { Jobs } from '../../core/jobs.js';
import { every, PauseLog, recurringPollMs } from '../../server/background.js';
import { createIsolatedDatabase, type IsolatedDatabase } from '../support/isolated-database.js';

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
  let db: IsolatedDatabase;
  let jobs: Jobs | undefined;
  before(async () => {
    db = await createIsolatedDatabase('background');
  });
  afterEach(async () => {
    await jobs?.stop(1000);
    jobs = undefined;
  });
  after(async () => {
    await db.drop();
  });

  /** A recurring job on the job runner, on a database of its own (so one test's chain is not another's). */
  async function recurring(logger: pino.Logger, name: string, task: () => Promise<void>) {
    jobs = new Jobs({ connectionString: db.url, applicationName: name, logger, pollMs: 500 });
    await jobs.start();
    await every(jobs, new PauseLog(logger), name, { intervalMs: 5, expireInMs: 60000 }, task);
  }

  it('when a job meets a failover (several runs in a row fail with a connection error), then it logs one "paused", keeps running, and logs "resumed" once a run succeeds', async () => {
    const { logger, lines } = capture();
    let runs = 0;
    await recurring(logger, 'test-job', async () => {
      runs++;
      if (runs <= 4) throw unavailable();
    });
    const deadline = Date.now() + 15000;
    while (runs < 6 && Date.now() < deadline) await sleep(5);
    await jobs?.stop(1000);
    const said = lines.filter((l) => l.job === 'test-job').map((l) => l.msg);
    expect(said).to.deep.equal([
      'background job paused: the database is unavailable',
      'background job resumed',
    ]);
  });

  it('when a job fails for another reason, then each failure is a warning of its own (not a pause)', async () => {
    const { logger, lines } = capture();
    let runs = 0;
    await recurring(logger, 'other-job', async () => {
      runs++;
      throw new Error('a bug');
    });
    const deadline = Date.now() + 15000;
    while (runs < 3 && Date.now() < deadline) await sleep(5);
    await jobs?.stop(1000);
    const said = lines.filter((l) => l.job === 'other-job').map((l) => l.msg);
    expect(said.length).to.be.at.least(3);
    expect(new Set(said)).to.deep.equal(new Set(['background job failed']));
  });
});

describe('background jobs: each recurring queue polls by its own interval', () => {
  it("when the interval is short, then the poll is pg-boss's least (500 ms); a quarter of a longer one, at most 5 s", () => {
    expect([100, 2000, 5000, 20000, 60000, 86400000].map(recurringPollMs)).to.deep.equal([
      500, 500, 1250, 5000, 5000, 5000,
    ]);
  });
});

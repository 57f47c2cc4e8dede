import { type ChildProcess, spawn } from 'node:child_process';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { expect } from 'chai';
import pino from 'pino';
import { QueryTypes } from 'sequelize';
import { Jobs, retryDelayMs } from '../../core/jobs.js';
import { every, PauseLog } from '../../server/background.js';
import { createIsolatedDatabase, type IsolatedDatabase } from '../support/isolated-database.js';

const quiet = pino({ level: 'silent' });
const runner = (db: IsolatedDatabase, name: string) =>
  new Jobs({
    connectionString: db.url,
    applicationName: name,
    logger: quiet,
    pollMs: 500,
    maintenanceMs: 1000,
  });

async function until<T>(what: string, probe: () => Promise<T | undefined>, ms = 25000): Promise<T> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    const found = await probe();
    if (found !== undefined) return found;
    await sleep(100);
  }
  throw new Error(`gave up waiting for ${what}`);
}

describe('job runner (pg-boss) on a real database', () => {
  let db: IsolatedDatabase;
  const running: Jobs[] = [];

  before(async () => {
    db = await createIsolatedDatabase('jobs');
    await db.sequelize.query('CREATE TABLE job_marks (pid int, attempt int, at timestamptz DEFAULT now())');
  });
  after(async () => {
    for (const child of children)
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await Promise.all(running.map((jobs) => jobs.stop(1000).catch(() => {})));
    await db.drop();
  });

  it('when two runners tick the same recurring job, then past the start-up its runs never overlap and each run is followed by exactly one pending job', async () => {
    const runs: Array<{ runner: string; start: number; end: number }> = [];
    let active = 0;
    let overlapped = false;
    // Runner b's first add may land during a run of a's (then both run once): the one overlap allowed.
    let settled = Number.POSITIVE_INFINITY;
    for (const name of ['a', 'b']) {
      const jobs = runner(db, `tick-${name}`);
      running.push(jobs);
      await jobs.start();
      await every(jobs, new PauseLog(quiet), 'tick', { intervalMs: 100, expireInMs: 60000 }, async () => {
        active++;
        if (active > 1 && Date.now() > settled) overlapped = true;
        const start = Date.now();
        await sleep(150);
        runs.push({ runner: name, start, end: Date.now() });
        active--;
      });
    }
    settled = Date.now() + 1000;
    await until('8 runs after that', async () =>
      runs.filter((r) => r.start > settled).length >= 8 ? true : undefined,
    );
    expect(overlapped, 'two runs at once').to.equal(false);
    // While a run is going its job is active and the next is not added yet (a run adds it as it
    // ends, before its own job completes): at any moment one job is pending or running, never two
    // pending. Sampled over about two runs, each sample one snapshot of the queue.
    for (let i = 0; i < 20; i++) {
      const [queue] = await db.sequelize.query<{ pending: string; active: string }>(
        `SELECT count(*) FILTER (WHERE state IN ('created', 'retry')) AS pending,
                count(*) FILTER (WHERE state = 'active') AS active
           FROM pgboss.job WHERE name = 'tick-every-100ms'`,
        { type: QueryTypes.SELECT },
      );
      expect(Number(queue?.pending), 'pending jobs').to.be.at.most(1);
      expect(Number(queue?.pending) + Number(queue?.active), 'pending or running').to.be.at.least(1);
      await sleep(50);
    }
  });

  it('when a worker process is SIGKILLed mid-job, then another process runs that job again once pg-boss finds it expired', async () => {
    const first = await startWorker(db.url, { JOB_ADD: '1' });
    const started = await until('the first attempt', async () => marks(db, first.pid ?? -1));
    expect(started).to.deep.equal([1]);
    first.kill('SIGKILL');
    const second = await startWorker(db.url, {});
    const again = await until('the job run again', async () => marks(db, second.pid ?? -1));
    expect(again).to.deep.equal([2]);
  });

  it('when an instance whose clock is 5 minutes ahead ran a recurring chain and stopped, then another runner runs the chain at once (the next run is scheduled on the database clock)', async () => {
    // The skewed instance schedules the chain's next run when each run ends, also at its stop; with
    // one pending run per chain, a run scheduled by its clock 5 minutes late held every instance's
    // chain for 5 minutes (the webhook dispatch after test/idempotency/clocks.test.ts did).
    const clock = path.resolve('test/support/skewed-clock.mjs');
    const ahead = await startWorker(db.url, {
      JOB_EVERY: '1',
      NODE_OPTIONS: `--import=${clock}`,
      CLOCK_SKEW_MS: String(5 * 60_000),
    });
    await until('two runs of the skewed instance', async () =>
      ((await marks(db, ahead.pid ?? -1))?.length ?? 0) >= 2 ? true : undefined,
    );
    const exited = new Promise((resolve) => ahead.once('exit', resolve));
    ahead.kill('SIGTERM');
    await exited;
    const jobs = runner(db, 'after-skew');
    running.push(jobs);
    await jobs.start();
    let runs = 0;
    await every(jobs, new PauseLog(quiet), 'test-tick', { intervalMs: 100, expireInMs: 60000 }, async () => {
      runs++;
    });
    await until('three runs on the runner with the right clock', async () => (runs >= 3 ? true : undefined));
  });

  it('when a task fails, then it runs again after the back-off delay until maxAttempts, and no more', async () => {
    const jobs = runner(db, 'retrying');
    running.push(jobs);
    await jobs.start();
    const attempts: number[] = [];
    await jobs.task(
      'flaky',
      async (_payload, { attempt }) => {
        attempts.push(attempt);
        throw new Error('the partner is down');
      },
      { expireInMs: 60000 },
    );
    await jobs.add('flaky', {}, { maxAttempts: 3, backoff: { delaysMs: [50, 100], jitter: 0.2 } });
    await until('the third attempt', async () => (attempts.length >= 3 ? true : undefined));
    const failed = await until('the job failed for good', async () => {
      const rows = await db.sequelize.query<{ n: string }>(
        "SELECT count(*) AS n FROM pgboss.job WHERE name = 'flaky' AND state = 'failed'",
        { type: QueryTypes.SELECT },
      );
      return Number(rows[0]?.n) > 0 ? Number(rows[0]?.n) : undefined;
    });
    expect(failed).to.equal(1);
    expect(attempts).to.deep.equal([1, 2, 3]);
  });

  it('retryDelayMs: attempt n waits delaysMs[n-1], the last delay repeats, jitter stays within its share', () => {
    const backoff = { delaysMs: [5000, 30000, 120000] };
    expect([1, 2, 3, 4, 9].map((n) => retryDelayMs(backoff, n))).to.deep.equal([
      5000, 30000, 120000, 120000, 120000,
    ]);
    for (let i = 0; i < 50; i++) {
      const d = retryDelayMs({ delaysMs: [1000], jitter: 0.2 }, 1);
      expect(d).to.be.within(800, 1200);
    }
  });

  it('when the runner stops during a job, then stop() aborts the task signal and resolves only after the task ended', async () => {
    const jobs = runner(db, 'stopping');
    await jobs.start();
    let began = false;
    let ended = false;
    await jobs.task(
      'long',
      async (_payload, { signal }) => {
        began = true;
        await new Promise((resolve) => signal.addEventListener('abort', resolve));
        await sleep(300);
        ended = true;
      },
      { expireInMs: 60000 },
    );
    await jobs.add('long', {});
    await until('the job to start', async () => (began ? true : undefined));
    await jobs.stop(5000);
    expect(ended).to.equal(true);
  });
});

async function marks(db: IsolatedDatabase, pid: number): Promise<number[] | undefined> {
  const rows = await db.sequelize.query<{ attempt: number }>('SELECT attempt FROM job_marks WHERE pid = $1', {
    bind: [pid],
    type: QueryTypes.SELECT,
  });
  return rows.length > 0 ? rows.map((r) => r.attempt) : undefined;
}

const children = new Set<ChildProcess>();

/** A job runner process (test/support/job-worker.ts) on `url`, once it says it is ready. */
async function startWorker(url: string, env: Record<string, string>): Promise<ChildProcess> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'test/support/job-worker.ts'], {
    env: { PATH: process.env.PATH ?? '', DATABASE_URL: url, ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  children.add(child);
  await new Promise<void>((resolve, reject) => {
    child.stdout?.on('data', (d: Buffer) => d.toString().includes('ready') && resolve());
    child.once('exit', (code) => reject(new Error(`job worker exited (${code})`)));
  });
  return child;
}

/**
 * A job runner process for test/jobs: runs the test-only task `test-hang`, which records its start
 * (pid, attempt) in job_marks, then on its first attempt hangs until killed and on a later one ends.
 * JOB_ADD=1 also adds one such job; JOB_EVERY=1 runs a recurring chain (below). A short expiry and maintenance round make a dead worker's job
 * found again in seconds (pg-boss: expireInSeconds + maintenanceIntervalSeconds).
 */
import pg from 'pg';
import pino from 'pino';
import { Jobs } from '../../core/jobs.js';
import { every, PauseLog } from '../../server/background.js';

const url = process.env.DATABASE_URL ?? '';
const pool = new pg.Pool({ connectionString: url, max: 2 });
const jobs = new Jobs({
  connectionString: url,
  applicationName: `job-worker:${process.pid}`,
  logger: pino({ level: 'warn' }),
  pollMs: 500,
  maintenanceMs: 1000,
});
await jobs.start();
await jobs.task<{ n: number }>(
  'test-hang',
  async (_payload, { attempt, signal }) => {
    await pool.query('INSERT INTO job_marks (pid, attempt) VALUES ($1, $2)', [process.pid, attempt]);
    if (attempt === 1) await new Promise((resolve) => signal.addEventListener('abort', resolve));
  },
  { expireInMs: 1000 },
);
if (process.env.JOB_ADD === '1') await jobs.add('test-hang', { n: 1 }, { maxAttempts: 2 });
// JOB_EVERY=1: also the recurring chain 'test-tick' every 100 ms (server/background.ts), each run
// recording (pid, 0), as a service instance runs its purge, recoverer and webhook dispatch.
if (process.env.JOB_EVERY === '1')
  await every(
    jobs,
    new PauseLog(pino({ level: 'silent' })),
    'test-tick',
    { intervalMs: 100, expireInMs: 60000 },
    () => pool.query('INSERT INTO job_marks (pid, attempt) VALUES ($1, 0)', [process.pid]),
  );
process.stdout.write('ready\n');
process.once('SIGTERM', () => {
  jobs
    .stop(5000)
    .then(() => pool.end())
    .then(() => process.exit(0));
});

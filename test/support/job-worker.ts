/**
 * A job runner process for test/jobs: runs the test-only task `test-hang`, which records its start
 * (pid, attempt) in job_marks, then on its first attempt hangs until killed and on a later one ends.
 * JOB_ADD=1 also adds one such job. A short expiry and maintenance round make a dead worker's job
 * found again in seconds (pg-boss: expireInSeconds + maintenanceIntervalSeconds).
 */
import pg from 'pg';
import pino from 'pino';
import { Jobs } from '../../core/jobs.js';

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
process.stdout.write('ready\n');
process.once('SIGTERM', () => {
  jobs
    .stop(5000)
    .then(() => pool.end())
    .then(() => process.exit(0));
});

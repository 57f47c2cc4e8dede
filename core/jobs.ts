import type PgBoss from 'pg-boss';
import type { Logger } from 'pino';

/**
 * The service's background jobs, on pg-boss (docs/JOBS.md says why this library): jobs live in
 * PostgreSQL (schema `pgboss`), any instance runs them, and no LISTEN/NOTIFY is needed (it polls),
 * so it works behind PgBouncer in transaction mode and without Redis.
 */

/** Retry delays after a failed attempt: attempt n waits delaysMs[n-1] (the last one repeats). */
export interface Backoff {
  delaysMs: readonly number[];
  /** ± this share of each delay, at random, so failures that happened together spread out. */
  jitter?: number;
}

export interface AddOptions {
  /**
   * Run no earlier than this long from now, counted on the database's clock: pg-boss adds it to
   * now() in SQL. An absolute time from this process's clock would not do: an instance whose clock
   * is ahead would schedule the run that far late, and with one pending job per key (`unique`) no
   * other instance could schedule an earlier one (test/jobs/job-runner.test.ts, skewed clock).
   */
  delayMs?: number;
  /** With a task registered `unique`: a second add while one is pending is a no-op (returns null). */
  jobKey?: string;
  /** 1 (the default): never retried. A worker that died mid-job also uses one attempt. */
  maxAttempts?: number;
  backoff?: Backoff;
}

export interface TaskOptions {
  /** A job still running after this is taken as dead (its worker killed) and run again elsewhere. */
  expireInMs: number;
  /**
   * Per jobKey: 'pending' allows one pending job (pg-boss's `short` policy); 'pending-and-running'
   * also one running (`stately`: a webhook delivery's attempts never overlap; but a job whose worker
   * died blocks its key's next one until it expires, and the queue's fetch with it).
   */
  unique?: 'pending' | 'pending-and-running';
  /**
   * How often this queue's worker looks for due jobs (at least 500 ms); the runner's `pollMs` when
   * absent. A queue whose jobs are due seconds apart needs no half-second poll: every poll is a
   * query, on every instance, whether anything is due or not.
   */
  pollMs?: number;
}

export interface JobContext {
  /** Aborted at stop(): a long task ends at its next step. */
  signal: AbortSignal;
  /** 1 for the first run of this job. */
  attempt: number;
}

export type TaskHandler<P> = (payload: P, context: JobContext) => Promise<void>;

/** What pg-boss stores: the payload and what our retries need to know across instances. */
interface Envelope<P> {
  payload: P;
  attempt: number;
  maxAttempts: number;
  backoff?: Backoff;
}

export interface JobsOptions {
  connectionString: string;
  applicationName: string;
  logger: Logger;
  /** How often a worker looks for due jobs (pg-boss: at least 500 ms). */
  pollMs?: number;
  /** How often dead workers' jobs are looked for (pg-boss maintenance; at least 1 s). */
  maintenanceMs?: number;
  /** pg-boss's own errors (a failed poll: the database unavailable); `queue` names the task if any. */
  onError?: (err: Error & { queue?: string }) => void;
}

const seconds = (ms: number, min: number) => Math.max(min, Math.ceil(ms / 1000));

export function retryDelayMs(backoff: Backoff, attempt: number): number {
  const { delaysMs, jitter = 0 } = backoff;
  const base = delaysMs[Math.min(attempt, delaysMs.length) - 1] ?? 0;
  return Math.max(0, Math.round(base * (1 + jitter * (2 * Math.random() - 1))));
}

export class Jobs {
  private started?: PgBoss;
  private readonly stopping = new AbortController();
  private readonly running = new Set<Promise<void>>();
  private readonly pollMs: number;

  constructor(private readonly options: JobsOptions) {
    this.pollMs = options.pollMs ?? 2000;
  }

  /**
   * Creates or upgrades pg-boss's schema (under its own advisory lock: instances may start together).
   * pg-boss is loaded here, not at import: the process's start (before its database is reachable
   * or writable) does not wait for it.
   */
  async start(): Promise<void> {
    const { default: Boss } = await import('pg-boss');
    const { options } = this;
    const boss = new Boss({
      connectionString: options.connectionString,
      application_name: options.applicationName,
      max: 4,
      maintenanceIntervalSeconds: seconds(options.maintenanceMs ?? 60_000, 1),
      // pg-boss's cron is per minute; recurring jobs reschedule themselves (server/background.ts).
      schedule: false,
    });
    boss.on('error', (err) =>
      (options.onError ?? ((e) => options.logger.warn({ err: e }, 'job runner error')))(err),
    );
    await boss.start().catch(async (err: unknown) => {
      await boss.stop({ graceful: false }).catch(() => {});
      throw err;
    });
    this.started = boss;
  }

  private get boss(): PgBoss {
    if (!this.started) throw new Error('Jobs.start() has not run');
    return this.started;
  }

  async task<P>(name: string, handler: TaskHandler<P>, options: TaskOptions): Promise<void> {
    await this.boss.createQueue(name, {
      name,
      policy: options.unique === 'pending' ? 'short' : options.unique ? 'stately' : 'standard',
      expireInSeconds: seconds(options.expireInMs, 1),
    });
    await this.boss.work<Envelope<P>>(
      name,
      {
        pollingIntervalSeconds: Math.max(0.5, (options.pollMs ?? this.pollMs) / 1000),
        includeMetadata: true,
      },
      async ([job]) => {
        if (!job) return;
        // A job run again after its worker died counts that run as an attempt (pg-boss's retryCount).
        const attempt = job.data.attempt + job.retryCount;
        const run = this.runOne(name, job, attempt, handler);
        this.running.add(run);
        await run.finally(() => this.running.delete(run));
      },
    );
  }

  private async runOne<P>(
    name: string,
    job: PgBoss.JobWithMetadata<Envelope<P>>,
    attempt: number,
    handler: TaskHandler<P>,
  ): Promise<void> {
    try {
      await handler(job.data.payload, { signal: this.stopping.signal, attempt });
    } catch (err) {
      const { maxAttempts, backoff } = job.data;
      if (attempt >= maxAttempts) throw err;
      const delay = backoff ? retryDelayMs(backoff, attempt) : 0;
      this.options.logger.warn({ err, job: name, attempt, retryInMs: delay }, 'job failed; retried later');
      // The next attempt is a job of its own, so its start time follows our back-off, not pg-boss's.
      await this.send(
        name,
        job.data.payload,
        {
          delayMs: delay,
          jobKey: job.singletonKey ?? undefined,
          maxAttempts,
          backoff,
        },
        attempt + 1,
      );
    }
  }

  /** Returns the job's id, or null when a job with this jobKey is already pending. */
  add<P>(name: string, payload: P, options: AddOptions = {}): Promise<string | null> {
    return this.send(name, payload, options, 1);
  }

  private send<P>(name: string, payload: P, options: AddOptions, attempt: number): Promise<string | null> {
    const maxAttempts = options.maxAttempts ?? 1;
    const envelope: Envelope<P> = { payload, attempt, maxAttempts, backoff: options.backoff };
    return this.boss.send(name, envelope as object, {
      // Seconds as a number: pg-boss stores now() + that interval (a Date would be taken as is).
      startAfter: delaySeconds(options.delayMs),
      singletonKey: options.jobKey,
      // Only for a worker that died mid-job (handler errors are retried by runOne, with the back-off).
      retryLimit: Math.max(0, maxAttempts - attempt),
      retryDelay: 0,
    });
  }

  /**
   * Aborts the running tasks' signal and waits for them; pg-boss stops fetching, waits for its
   * workers (a job still running after timeoutMs is failed, so it is retried elsewhere), then closes.
   */
  async stop(timeoutMs: number): Promise<void> {
    this.stopping.abort();
    if (!this.started) return;
    await Promise.all([
      Promise.allSettled(this.running),
      this.boss.stop({ graceful: true, wait: true, timeout: timeoutMs }),
    ]);
  }
}

/** A delay as pg-boss's `startAfter` seconds (fractions kept; 0 or none: due now). */
function delaySeconds(delayMs: number | undefined): number | undefined {
  return delayMs !== undefined && delayMs > 0 ? delayMs / 1000 : undefined;
}

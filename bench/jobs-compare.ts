/**
 * graphile-worker vs pg-boss, measured on one PostgreSQL (docs/JOBS.md holds the figures).
 * Both libraries must be installed; the one the service does not use only for this run:
 *   npm install --no-save graphile-worker@0.17.3
 *   JOBS_DIRECT_URL=postgres://postgres@127.0.0.1:5432/jobs_bench \
 *   JOBS_POOLED_URL=postgres://postgres@127.0.0.1:6439/jobs_bench \  # PgBouncer, pool_mode=transaction
 *   node --import tsx bench/jobs-compare.ts
 * Each library gets a schema of its own, dropped first, so runs do not see each other's jobs.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import PgBoss from 'pg-boss';

const DIRECT = process.env.JOBS_DIRECT_URL ?? 'postgres://postgres@127.0.0.1:5432/jobs_bench';
const POOLED = process.env.JOBS_POOLED_URL;
const THROUGHPUT_JOBS = Number(process.env.JOBS_N ?? 2000);
const LATENCY_JOBS = 100;
const LATENCY_GAP_MS = 30;

interface Runner {
  /** Enqueue `n` trivial jobs in one statement. */
  bulk(n: number): Promise<void>;
  add(payload: { at: number }): Promise<void>;
  stop(): Promise<void>;
}
type Handler = (payload: { at?: number }) => void;
interface Library {
  name: string;
  /** graphile-worker: jobs run at once; pg-boss 10: jobs fetched per poll (a worker sleeps a poll interval after each fetch). */
  concurrency: number[];
  /** For the latency runs: a job waits for its worker's next poll, never behind other jobs. */
  latencyConcurrency: number;
  start(url: string, handler: Handler, options: { concurrency: number; pollMs: number }): Promise<Runner>;
}

/** The part of graphile-worker used here: it is not in package.json, so the type checker does not see it. */
interface GraphileWorker {
  run(options: object): Promise<{ stop(): Promise<void> }>;
  makeWorkerUtils(options: object): Promise<{
    migrate(): Promise<void>;
    addJob(task: string, payload: object): Promise<unknown>;
    release(): Promise<void>;
  }>;
  Logger: new (factory: () => (level: string, message: string) => void) => object;
}
const loadGraphile = (name = 'graphile-worker'): Promise<GraphileWorker> => import(name);

const graphile: Library = {
  name: 'graphile-worker 0.17.3',
  concurrency: [1, 10],
  latencyConcurrency: 1,
  async start(url, handler, { concurrency, pollMs }) {
    const lib = await loadGraphile();
    const admin = new pg.Pool({ connectionString: url, max: 2 });
    await admin.query('DROP SCHEMA IF EXISTS bench_gw CASCADE');
    const options = { connectionString: url, schema: 'bench_gw', noPreparedStatements: url === POOLED };
    const utils = await lib.makeWorkerUtils(options);
    await utils.migrate();
    const runner = await lib.run({
      ...options,
      concurrency,
      pollInterval: pollMs,
      noHandleSignals: true,
      logger: new lib.Logger(() => () => {}),
      taskList: { t: async (payload: { at?: number }) => handler(payload) },
    });
    return {
      bulk: async (n) => {
        await admin.query(
          "SELECT bench_gw.add_job('t', json_build_object('i', i)) FROM generate_series(1, $1) i",
          [n],
        );
      },
      add: async (payload) => {
        await utils.addJob('t', payload);
      },
      stop: async () => {
        await runner.stop();
        await utils.release();
        await admin.end();
      },
    };
  },
};

const pgBoss: Library = {
  name: 'pg-boss 10.4.2',
  concurrency: [10, 100],
  latencyConcurrency: 100,
  async start(url, handler, { concurrency, pollMs }) {
    const admin = new pg.Pool({ connectionString: url, max: 2 });
    await admin.query('DROP SCHEMA IF EXISTS bench_boss CASCADE');
    const boss = new PgBoss({
      connectionString: url,
      schema: 'bench_boss',
      supervise: false,
      schedule: false,
    });
    boss.on('error', () => {});
    await boss.start();
    await boss.createQueue('t');
    await boss.work(
      't',
      { batchSize: concurrency, pollingIntervalSeconds: pollMs / 1000 },
      async (jobs: Array<{ data: { at?: number } }>) => {
        for (const job of jobs) handler(job.data);
      },
    );
    return {
      bulk: async (n) => {
        await boss.insert(Array.from({ length: n }, (_, i) => ({ name: 't', data: { i } })));
      },
      add: async (payload) => {
        await boss.send('t', payload);
      },
      stop: async () => {
        await boss.stop({ graceful: true, wait: true, timeout: 5000 });
        await admin.end();
      },
    };
  },
};

async function throughput(lib: Library, url: string, concurrency: number): Promise<number> {
  let done = 0;
  const runner = await lib.start(url, () => done++, { concurrency, pollMs: 500 });
  await runner.bulk(THROUGHPUT_JOBS);
  const started = performance.now();
  while (done < THROUGHPUT_JOBS) await sleep(5);
  const seconds = (performance.now() - started) / 1000;
  await runner.stop();
  return Math.round(THROUGHPUT_JOBS / seconds);
}

/** Enqueue → start, one job at a time, LATENCY_GAP_MS apart (the worker idle in between). */
async function latency(lib: Library, url: string, pollMs: number): Promise<{ p50: number; p99: number }> {
  const waits: number[] = [];
  const runner = await lib.start(url, (p) => p.at !== undefined && waits.push(Date.now() - p.at), {
    concurrency: lib.latencyConcurrency,
    pollMs,
  });
  for (let i = 0; i < LATENCY_JOBS; i++) {
    await runner.add({ at: Date.now() });
    await sleep(LATENCY_GAP_MS);
  }
  const deadline = Date.now() + 4 * pollMs + 5000;
  while (waits.length < LATENCY_JOBS && Date.now() < deadline) await sleep(10);
  await runner.stop();
  if (waits.length < LATENCY_JOBS)
    throw new Error(`${lib.name}: only ${waits.length}/${LATENCY_JOBS} jobs ran`);
  waits.sort((a, b) => a - b);
  const at = (q: number) => waits[Math.min(waits.length - 1, Math.floor(q * waits.length))] ?? Number.NaN;
  return { p50: at(0.5), p99: at(0.99) };
}

async function main() {
  const targets: Array<[string, string]> = [['direct', DIRECT]];
  if (POOLED) targets.push(['pgbouncer(tx)', POOLED]);
  const only = process.env.JOBS_ONLY;
  for (const lib of [graphile, pgBoss].filter((l) => !only || l.name.startsWith(only))) {
    for (const [where, url] of targets) {
      for (const concurrency of lib.concurrency) {
        const perSecond = await throughput(lib, url, concurrency).catch((e: Error) => `failed: ${e.message}`);
        console.log(
          `${lib.name} | ${where} | throughput, ${THROUGHPUT_JOBS} jobs, concurrency/batch ${concurrency} | ${perSecond} jobs/s`,
        );
      }
      for (const pollMs of [500, 2000]) {
        const ms = await latency(lib, url, pollMs).catch((e: Error) => `failed: ${e.message}`);
        console.log(`${lib.name} | ${where} | latency, poll ${pollMs} ms | ${JSON.stringify(ms)}`);
      }
    }
  }
}

await main();
process.exit(0);

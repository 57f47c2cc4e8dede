/**
 * `npm run bench` (about 4 min) / `npm run bench -- --quick` (under 1 min). See docs/BENCHMARKS.md.
 *
 * Starts a PostgreSQL (embedded, or a scratch database on DATABASE_URL, dropped at the end), ONE
 * service process (`node --import tsx server/main.ts` plus bench/probe.ts, a preload that counts
 * queries or records a CPU profile only when asked), a bare Express 5 process (HTTP ceiling), and
 * drives them from this process with autocannon and pgbench, on loopback, bounded in count and
 * time. Everything is reported as ratios within one run: one table on stdout, the details in
 * bench/results/<timestamp>.json.
 *
 * Options: --quick; --only=<scenario,...> (plain always runs: it is the baseline); --profile (CPU
 * profile of the service per scenario, under bench/results/profiles/); --rounds=N --segment=S
 * --connections=N; what-if experiments, never the default: --server-env=NAME=VALUE (repeatable),
 * --purge-pause-ms=N.
 */
import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import type { Sequelize } from 'sequelize';
import { createSequelize } from '../core/database.js';
import { freePort } from '../core/embedded-postgres.js';
import { purgeExpired } from '../idempotency/purge-expired.js';
import { signToken } from '../routers/auth/jwt.js';
import { type LoadRequest, type LoadResult, load, nonFinal, percentile } from './load.js';
import {
  type CapturedCall,
  type PgbenchResult,
  runPgbench,
  type Substitution,
  scriptFromCapture,
} from './pgbench.js';
import { type BenchDatabase, killQuietly, openBenchDatabase } from './postgres.js';
import { ask, type Child, cpuOf, memoryOf, postgresCpuOf, sampleMemory, startNode } from './processes.js';
import { summariseProfiles } from './profile-summary.js';
import { type Row, r2, ratio, renderTable } from './report.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

// ---------------------------------------------------------------------------------------------
// Options

const argv = process.argv.slice(2);
const flag = (name: string) => argv.includes(`--${name}`);
const option = (name: string) => argv.find((a) => a.startsWith(`--${name}=`))?.split('=')[1];
const QUICK = flag('quick');
const PROFILE = flag('profile');
// What-if experiments, off by default (see docs/BENCHMARKS.md): any service variable
// (--server-env=DB_POOL_MAX=16, repeatable) and a throttled purge (--purge-pause-ms=5).
const PURGE_PAUSE_MS = Number(option('purge-pause-ms') ?? 0);
const SERVER_ENV = Object.fromEntries(
  argv
    .filter((a) => a.startsWith('--server-env='))
    .map((a) => a.slice('--server-env='.length))
    .map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]),
);
const ALL = [
  'bare',
  'idem-users',
  'idem-orders',
  'replay',
  'storm',
  'payments',
  'roundtrips',
  'pgbench',
  'growth',
  'purge',
] as const;
type ScenarioId = (typeof ALL)[number];
const ONLY = option('only')?.split(',');
if (ONLY) {
  const unknown = ONLY.filter((s) => !(ALL as readonly string[]).includes(s) && s !== 'plain');
  if (unknown.length) {
    console.error(`unknown scenario(s): ${unknown.join(', ')}; known: plain, ${ALL.join(', ')}`);
    process.exit(2);
  }
}
const enabled = (s: ScenarioId) => !ONLY || ONLY.includes(s);

const CONNECTIONS = Number(option('connections') ?? 16);
const P = QUICK
  ? {
      // Two short rounds rather than one: the baseline is not always measured first.
      rounds: 2,
      segment: 1,
      growthRounds: 1,
      growthSegment: 2,
      short: 2,
      warmup: 1,
      stormRounds: 3,
      replayKeys: 256,
      growthSeeds: 256,
      growthSmall: 10_000,
      growthBig: 100_000,
      purgeRows: 100_000,
      purgeMax: 15,
      countN: 20,
      paymentOrders: 10_000,
    }
  : {
      rounds: 4,
      segment: 3,
      growthRounds: 3,
      growthSegment: 3,
      short: 8,
      warmup: 3,
      stormRounds: 20,
      replayKeys: 2048,
      growthSeeds: 1024,
      growthSmall: 10_000,
      growthBig: 1_000_000,
      purgeRows: 1_000_000,
      purgeMax: 45,
      countN: 200,
      paymentOrders: 60_000,
    };
const ROUNDS = Number(option('rounds') ?? P.rounds);
const SEGMENT = Number(option('segment') ?? P.segment);
const STORM_SIZE = 200;
const TENANT = 'bench';
const ADMINS = 1000;
const USERS = 1000;
// Token user ids far above any id the run creates (a created row's role would win over the token's).
const ADMIN_BASE = 9_000_000_000;
const USER_BASE = 9_100_000_000;
const STORM_BASE = 9_200_000_000;
const WAIT_MS = 1000;
const MAX_RETAINED = 1_000_000;
const MAX_IN_FLIGHT = 20;
const SECRETS = {
  JWT_SECRET: 'bench-jwt-secret-0123456789abcdef',
  IDEMPOTENCY_HMAC_KEY: 'bench-hmac-key-0123456789abcdef',
  RESPONSE_ENCRYPTION_KEY: Buffer.alloc(32, 5).toString('base64'),
};

// ---------------------------------------------------------------------------------------------
// Logging, cleanup

const t0 = Date.now();
const GIT = gitState();
const log = (line: string) =>
  process.stderr.write(`[bench ${((Date.now() - t0) / 1000).toFixed(1)}s] ${line}\n`);
const cleanups: Array<() => Promise<void>> = [];
const pids = new Set<number>();
let cleaning: Promise<void> | undefined;
function cleanup(): Promise<void> {
  cleaning ??= (async () => {
    while (cleanups.length > 0) {
      const step = cleanups.pop();
      await step?.().catch((err: unknown) => log(`cleanup: ${err instanceof Error ? err.message : err}`));
    }
  })();
  return cleaning;
}
// Last resort: whatever is still running when this process exits is killed by pid.
process.on('exit', () => {
  for (const pid of pids) killQuietly(pid);
});
// An error nobody awaited (e.g. an 'error' event) must not skip the cleanup either.
for (const event of ['uncaughtException', 'unhandledRejection'] as const) {
  process.on(event, (err: unknown) => {
    log(`${event}: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
    cleanup().finally(() => process.exit(1));
  });
}
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    log(`${signal}: stopping`);
    cleanup().finally(() => process.exit(130));
  });
}

// ---------------------------------------------------------------------------------------------
// Requests

const token = (id: number, role: 'admin' | 'user') =>
  `Bearer ${signToken(SECRETS.JWT_SECRET, { tenantId: TENANT, userId: String(id), role }, 4 * 3600).token}`;
const admins = Array.from({ length: ADMINS }, (_, i) => token(ADMIN_BASE + 1 + i, 'admin'));
const users = Array.from({ length: USERS }, (_, i) => token(USER_BASE + 1 + i, 'user'));
const USER_BODY = JSON.stringify({ name: 'Bench User', age: 30 });
const runId = randomUUID().slice(0, 8);
let seq = 0;

const plainUser = (): LoadRequest => ({
  method: 'POST',
  path: '/api/v1/users',
  headers: { authorization: admins[seq++ % ADMINS] },
  body: USER_BODY,
});
const idemUser = (): LoadRequest => ({
  method: 'POST',
  path: '/api/v1/users',
  headers: { authorization: admins[seq++ % ADMINS], 'idempotency-key': randomUUID() },
  body: USER_BODY,
});
const idemOrder = (): LoadRequest => {
  const i = seq++;
  return {
    method: 'POST',
    path: '/api/v1/orders',
    headers: { authorization: users[i % USERS], 'idempotency-key': randomUUID() },
    body: JSON.stringify({ merchantOrderNo: `o-${runId}-${i}`, amount: '10.50' }),
  };
};

interface ReplayKey {
  admin: number;
  key: string;
}
const replayRequest = (k: ReplayKey): LoadRequest => ({
  method: 'POST',
  path: '/api/v1/users',
  headers: { authorization: admins[k.admin], 'idempotency-key': k.key },
  body: USER_BODY,
});
const newReplayKeys = (n: number): ReplayKey[] =>
  Array.from({ length: n }, (_, i) => ({ admin: i % ADMINS, key: randomUUID() }));

// ---------------------------------------------------------------------------------------------

interface Context {
  db: BenchDatabase;
  sql: pg.Pool;
  server: Child;
  bare?: Child;
}

const results: Record<string, unknown> = {};
const rows: Row[] = [];
/** The service's RSS after each interleaved segment (which scenario grows it). */
const segmentMemory: Array<{ after: string; hwmMb?: number; rssMb?: number }> = [];
/** CPU ms per final answer (or pgbench transaction), by process, for the interleaved scenarios. */
const cpuTable: Array<{ name: string; service: number; postgres: number; loadGenerator: number }> = [];

async function main(): Promise<void> {
  log(
    `mode ${QUICK ? 'quick' : 'full'}; ${CONNECTIONS} connections; throughput scenarios ${ROUNDS} × ${SEGMENT}s`,
  );
  if (Object.keys(SERVER_ENV).length > 0 || PROFILE || PURGE_PAUSE_MS > 0) {
    log(
      `experiment: ${JSON.stringify({ serverEnv: SERVER_ENV, purgePauseMs: PURGE_PAUSE_MS, profile: PROFILE })} (not the default run)`,
    );
  }
  results.loadAverageAtStart = os.loadavg();
  if (os.loadavg()[0] > os.cpus().length) {
    log(
      `warning: load average ${os.loadavg()[0].toFixed(1)} on ${os.cpus().length} CPUs: other work shares this machine, numbers will be noisy`,
    );
  }
  const db = await openBenchDatabase(log);
  cleanups.push(() => db.stop());
  postmasterPid = db.pid;
  if (db.pid) pids.add(db.pid);
  log(`PostgreSQL ${db.version} (${db.origin}); pg_stat_statements ${db.statements ? 'on' : 'off'}`);

  const [serverPort, barePort] = await Promise.all([freePort(), freePort()]);
  if (PROFILE) await mkdir(PROFILE_DIR, { recursive: true });
  const serverStart = startNode({
    name: 'service',
    args: ['--import', 'tsx', '--import', './bench/probe.ts', 'server/main.ts'],
    env: {
      ...SECRETS,
      NODE_ENV: 'test',
      LOG_LEVEL: 'warn',
      DATABASE_URL: db.url,
      HOST: '127.0.0.1',
      PORT: String(serverPort),
      IDEMPOTENCY_WAIT_MS: String(WAIT_MS),
      IDEMPOTENCY_MAX_RETAINED: String(MAX_RETAINED),
      IDEMPOTENCY_MAX_IN_FLIGHT: String(MAX_IN_FLIGHT),
      // The benchmark runs the purge itself (purge scenario); the service's own job stays idle.
      PURGE_INTERVAL_MS: String(86_400_000),
      ...SERVER_ENV,
    },
    port: serverPort,
    readyPath: '/readyz',
    ipc: true,
  });
  const bareStart = enabled('bare')
    ? startNode({
        name: 'bare-express',
        args: ['--import', 'tsx', 'bench/bare-express.ts', String(barePort)],
        env: { NODE_ENV: 'production' },
        port: barePort,
        readyPath: '/healthz',
      })
    : undefined;
  const [serverSettled, bareSettled] = await Promise.allSettled([serverStart, bareStart]);
  for (const s of [serverSettled, bareSettled]) {
    if (s.status === 'fulfilled' && s.value) {
      const child = s.value;
      pids.add(child.pid);
      cleanups.push(() => child.stop());
    }
  }
  if (serverSettled.status === 'rejected') throw serverSettled.reason;
  if (bareSettled.status === 'rejected') throw bareSettled.reason;
  const server = serverSettled.value;
  serverChild = server;
  const bare = bareSettled.value;
  log(`service pid ${server.pid} at ${server.url}${bare ? `; bare Express pid ${bare.pid}` : ''}`);
  const memory = sampleMemory(server.pid);
  cleanups.push(async () => memory.stop());

  const sql = new pg.Pool({ connectionString: db.url, max: 4 });
  // pool.end() does not wait for its clients' sockets to close: when PostgreSQL stops right after,
  // an idle client sees "terminating connection" and the pool re-emits it. Nothing to do about it.
  sql.on('error', () => {});
  cleanups.push(() => sql.end());
  const ctx: Context = { db, sql, server, bare };

  results.memoryAfterStart = await serverMemory(server, true);
  // Warm-up (JIT, pools, caches): not reported.
  log('warm-up');
  await load({ url: server.url, connections: CONNECTIONS, duration: P.warmup, next: plainUser });
  await load({ url: server.url, connections: CONNECTIONS, duration: P.warmup, next: idemUser });
  if (bare) await load({ url: bare.url, connections: CONNECTIONS, duration: 1, next: plainUser });

  const captures = enabled('roundtrips') || enabled('pgbench') ? await roundTrips(ctx) : undefined;
  // Peak RSS so far after each phase (VmHWM only grows): shows which phase set the peak.
  const timeline: Array<{ after: string; hwmMb?: number; rssMb?: number }> = [];
  results.memoryTimeline = timeline;
  results.memoryBySegment = segmentMemory;
  const mark = (after: string) => {
    const m = memoryOf(server.pid);
    timeline.push({ after, hwmMb: m?.hwmMb, rssMb: m?.rssMb });
  };
  mark('warm-up and round trips');
  await throughputScenarios(ctx, enabled('pgbench') ? captures : undefined);
  mark('throughput');
  results.tableStatsAfterThroughput = await tableStats(sql);
  if (enabled('storm')) await stormScenario(ctx);
  mark('storm');
  results.memoryBeforeGrowth = await serverMemory(server, false);
  if (enabled('growth')) await growthScenario(ctx);
  mark('growth');
  if (enabled('purge')) await purgeScenario(ctx);
  mark('purge');

  results.loadAverageAtEnd = os.loadavg();
  const peak = memory.peak();
  const peakMb = Math.max(peak.vmHwmMb, peak.sampledMaxRssMb);
  results.memory = {
    ...peak,
    atEnd: await serverMemory(server, false),
    atEndAfterGc: await serverMemory(server, true),
  };
  rows.push({
    id: 'rss',
    scenario: 'Peak RSS of the service process',
    value: `${peakMb.toFixed(0)} MB`,
    target: '≤ 250 MB',
    pass: peakMb <= 250,
  });

  await server.stop();
  await report(ctx);
}

/** The commit measured, and whether the service's sources differ from it. */
function gitState(): { commit?: string; dirty?: string[] } {
  try {
    const commit = execFileSync('git', ['rev-parse', '--short', 'HEAD'], {
      cwd: ROOT,
      encoding: 'utf8',
    }).trim();
    const dirty = execFileSync(
      'git',
      ['status', '--porcelain', '--', 'server', 'routers', 'idempotency', 'models', 'gateway'],
      { cwd: ROOT, encoding: 'utf8' },
    )
      .split('\n')
      .filter(Boolean);
    return { commit, dirty };
  } catch {
    return {};
  }
}

function stamp(): string {
  return new Date().toISOString().replace(/[:.]/g, '-');
}
const PROFILE_DIR = path.join(ROOT, 'bench', 'results', 'profiles', stamp());
const profiles: Record<string, unknown> = {};
results.profiles = profiles;
let serverChild: Child | undefined;
let postmasterPid: number | undefined;

interface Cpu {
  service: number;
  postgres: number;
  /** This process (autocannon) plus its exited children (pgbench). */
  loadGenerator: number;
}
/** CPU time used so far (ms) by the service, PostgreSQL (embedded only) and the load generators. */
function cpuNow(servicePid = serverChild?.pid): Cpu {
  const self = process.cpuUsage();
  return {
    service: servicePid ? cpuOf(servicePid) : Number.NaN,
    postgres: postmasterPid ? postgresCpuOf(postmasterPid) : Number.NaN,
    loadGenerator: (self.user + self.system) / 1000 + childrenCpuOfSelf(),
  };
}
function childrenCpuOfSelf(): number {
  try {
    const raw = readFileSync('/proc/self/stat', 'utf8');
    const f = raw.slice(raw.lastIndexOf(')') + 2).split(' ');
    return (Number(f[13]) + Number(f[14])) * 10;
  } catch {
    return 0;
  }
}

async function measure(
  name: string,
  url: string,
  seconds: number,
  next: () => LoadRequest,
  extra: Partial<Parameters<typeof load>[0]> = {},
): Promise<LoadResult> {
  log(`${name}: ${seconds}s at ${CONNECTIONS} connections`);
  // --profile: a V8 CPU profile of the service during this scenario (the service only).
  const profiled = PROFILE && serverChild !== undefined && url === serverChild.url;
  if (profiled && serverChild) await ask(serverChild.child, { type: 'profile-start' }, 'profile-started');
  const r = await load({ url, connections: CONNECTIONS, duration: seconds, next, ...extra });
  if (profiled && serverChild) {
    const file = path.join(PROFILE_DIR, `${name}.cpuprofile`);
    await ask(serverChild.child, { type: 'profile-stop', file }, 'profile-stopped', 60000);
    profiles[name] = (await summariseProfiles(file, log))[0];
  }
  log(
    `${name}: ${r.rps.toFixed(0)} req/s (201), p50 ${r.p50.toFixed(1)} ms, p99 ${r.p99.toFixed(1)} ms${nonFinal(r) ? `, non-201 ${nonFinal(r)}` : ''}`,
  );
  results[name] = r;
  return r;
}

function loadRow(
  id: string,
  scenario: string,
  r: Pick<LoadResult, 'rps' | 'p50' | 'p99' | 'statuses' | 'errors'>,
  value: string,
  target: string,
  pass?: boolean,
): Row {
  const bad = nonFinal(r);
  return {
    id,
    scenario,
    rps: r.rps,
    p50: r.p50,
    p99: r.p99,
    nonFinal: bad,
    value,
    target,
    // Any 202, 429, 5xx or transport error makes a scenario fail, whatever its ratio.
    pass: pass === undefined ? (bad ? false : undefined) : pass && !bad,
  };
}

/** Sequential or concurrent requests through fetch (seeding, counting): exact, not timed. */
async function sendAll(
  url: string,
  requests: LoadRequest[],
  concurrency: number,
): Promise<{ statuses: Record<string, number>; replayed: number }> {
  const statuses: Record<string, number> = {};
  let replayed = 0;
  let next = 0;
  const worker = async () => {
    while (next < requests.length) {
      const r = requests[next++];
      const res = await fetch(url + r.path, {
        method: r.method,
        headers: { ...r.headers, ...(r.body ? { 'content-type': 'application/json' } : {}) },
        body: r.body,
      });
      await res.arrayBuffer();
      statuses[res.status] = (statuses[res.status] ?? 0) + 1;
      if (res.headers.get('idempotent-replayed') === 'true') replayed += 1;
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  return { statuses, replayed };
}

async function seedKeys(url: string, keys: ReplayKey[]): Promise<void> {
  const seeded = await sendAll(url, keys.map(replayRequest), CONNECTIONS);
  if ((seeded.statuses['201'] ?? 0) !== keys.length) {
    throw new Error(`seeding replay keys: ${JSON.stringify(seeded.statuses)}`);
  }
}

async function count(sql: pg.Pool, text: string, params: unknown[] = []): Promise<number> {
  return Number((await sql.query(text, params)).rows[0]?.n ?? 0);
}

// ---------------------------------------------------------------------------------------------
// Scenarios

/** Inserts, updates (HOT or not) and deletes per table so far: what each write costs in indexes. */
async function tableStats(sql: pg.Pool): Promise<unknown> {
  const r = await sql.query(
    `SELECT relname AS table, n_tup_ins AS inserted, n_tup_upd AS updated, n_tup_hot_upd AS hot_updated,
            n_tup_del AS deleted, n_live_tup AS live, n_dead_tup AS dead
     FROM pg_stat_user_tables WHERE relname IN ('users', 'idempotency_records', 'orders', 'payments')
     ORDER BY relname`,
  );
  return r.rows;
}

/** V8's view (heap, external) from the probe, and the kernel's (RSS: anonymous vs file-backed). */
async function serverMemory(server: Child, gc: boolean): Promise<unknown> {
  const v8 = await ask(server.child, { type: 'memory', gc }, 'memory-usage').catch(() => undefined);
  return { v8, proc: memoryOf(server.pid) };
}

interface Spec {
  name: string;
  url: string;
  next: () => LoadRequest;
  inspect?: (status: number, headers: Record<string, string | string[]>) => void;
  /** Instead of autocannon (pgbench). */
  run?: (seconds: number) => Promise<LoadResult>;
  /** Whose CPU the "service" column counts (default: the service; the bare Express process for bare). */
  pid?: number;
}

/** Joins the segments of one scenario measured in several rounds. */
function combine(parts: LoadResult[]): LoadResult {
  const samples = new Float64Array(parts.reduce((a, p) => a + p.samples.length, 0));
  let at = 0;
  for (const p of parts) {
    samples.set(p.samples, at);
    at += p.samples.length;
  }
  samples.sort();
  const statuses: Record<string, number> = {};
  for (const p of parts)
    for (const [k, v] of Object.entries(p.statuses)) statuses[k] = (statuses[k] ?? 0) + v;
  const durationSec = parts.reduce((a, p) => a + p.durationSec, 0);
  const created = parts.reduce((a, p) => a + p.created, 0);
  const out: Omit<LoadResult, 'samples'> = {
    durationSec,
    responses: samples.length,
    created,
    rps: durationSec > 0 ? created / durationSec : 0,
    p50: percentile(samples, 0.5),
    p90: percentile(samples, 0.9),
    p99: percentile(samples, 0.99),
    max: samples.length ? samples[samples.length - 1] : Number.NaN,
    statuses,
    errors: parts.reduce((a, p) => a + p.errors, 0),
  };
  return Object.defineProperty(out, 'samples', { value: samples, enumerable: false }) as LoadResult;
}

/**
 * The throughput scenarios, interleaved: `rounds` rounds, each running every scenario for
 * `seconds`. Machine load and JIT warm-up drift over a run; interleaving spreads that drift over
 * the baseline and the scenarios compared with it alike, so the ratios hold within one run.
 */
async function interleaved(
  specs: Spec[],
  rounds: number,
  seconds: number,
): Promise<Record<string, LoadResult>> {
  const parts: Record<string, LoadResult[]> = {};
  const cpu: Record<string, Cpu> = {};
  for (let round = 0; round < rounds; round++) {
    // Each round starts one scenario further on, so that no scenario always follows the same one.
    const order = specs.map((_, i) => specs[(i + round) % specs.length]);
    for (const spec of order) {
      const last = round === rounds - 1;
      const profiled = PROFILE && last && serverChild !== undefined && spec.url === serverChild.url;
      if (profiled && serverChild) await ask(serverChild.child, { type: 'profile-start' }, 'profile-started');
      const before = cpuNow(spec.pid);
      const r = spec.run
        ? await spec.run(seconds)
        : await load({
            url: spec.url,
            connections: CONNECTIONS,
            duration: seconds,
            next: spec.next,
            inspect: spec.inspect,
          });
      const after = cpuNow(spec.pid);
      if (serverChild) {
        const m = memoryOf(serverChild.pid);
        segmentMemory.push({ after: `${spec.name} ${round + 1}`, hwmMb: m?.hwmMb, rssMb: m?.rssMb });
      }
      const used = cpu[spec.name] ?? { service: 0, postgres: 0, loadGenerator: 0 };
      for (const k of ['service', 'postgres', 'loadGenerator'] as const) used[k] += after[k] - before[k];
      cpu[spec.name] = used;
      if (profiled && serverChild) {
        const file = path.join(PROFILE_DIR, `${spec.name}.cpuprofile`);
        await ask(serverChild.child, { type: 'profile-stop', file }, 'profile-stopped', 60000);
        profiles[spec.name] = (await summariseProfiles(file, log))[0];
      }
      log(
        `${spec.name} [round ${round + 1}/${rounds}]: ${r.rps.toFixed(0)} ${spec.run ? 'tps' : 'req/s'}, p50 ${r.p50.toFixed(1)} ms, p99 ${r.p99.toFixed(1)} ms${nonFinal(r) ? `, non-201 ${nonFinal(r)}` : ''}`,
      );
      const list = parts[spec.name] ?? [];
      list.push(r);
      parts[spec.name] = list;
    }
  }
  const out: Record<string, LoadResult> = {};
  for (const [name, list] of Object.entries(parts)) {
    out[name] = combine(list);
    const per = (ms: number) => Math.round((ms / Math.max(1, out[name].created)) * 1000) / 1000;
    const used = cpu[name];
    const cpuMsPerRequest = {
      service: per(used.service),
      postgres: per(used.postgres),
      loadGenerator: per(used.loadGenerator),
    };
    cpuTable.push({ name, ...cpuMsPerRequest });
    results[name] = { ...out[name], rounds: list.map((r) => Math.round(r.rps)), cpuMsPerRequest };
  }
  return out;
}

async function throughputScenarios(ctx: Context, captures?: Captures): Promise<void> {
  const { server, bare, sql } = ctx;
  const specs: Spec[] = [{ name: 'plain', url: server.url, next: plainUser }];
  if (bare) specs.push({ name: 'bare', url: bare.url, next: plainUser, pid: bare.pid });
  if (enabled('idem-users') || enabled('pgbench'))
    specs.push({ name: 'idem-users', url: server.url, next: idemUser });
  if (enabled('idem-orders')) specs.push({ name: 'idem-orders', url: server.url, next: idemOrder });
  let notReplayed = 0;
  if (enabled('replay')) {
    const keys = newReplayKeys(P.replayKeys);
    log(`replay: seeding ${keys.length} keys`);
    await seedKeys(server.url, keys);
    let i = 0;
    specs.push({
      name: 'replay',
      url: server.url,
      next: () => replayRequest(keys[i++ % keys.length]),
      // A 201 without Idempotent-Replayed would be a second execution.
      inspect: (status, headers) => {
        if (status === 201 && headers['idempotent-replayed'] !== 'true') notReplayed += 1;
      },
    });
  }
  let exhausted = false;
  if (enabled('payments')) {
    log(`payments: creating ${P.paymentOrders} orders to pay`);
    await createOrders(sql, 'pay', P.paymentOrders);
    let i = 0;
    specs.push({
      name: 'payments',
      url: server.url,
      next: () => {
        const n = i++;
        if (n >= P.paymentOrders) exhausted = true;
        const g = (n % P.paymentOrders) + 1;
        return {
          method: 'POST',
          path: '/api/v1/payments',
          headers: { authorization: users[g % USERS], 'idempotency-key': randomUUID() },
          body: JSON.stringify({ merchantOrderNo: `pay-${g}`, amount: '10.50' }),
        };
      },
    });
  }
  const pgbench = captures ? await pgbenchSpecs(ctx, captures) : [];
  specs.push(...pgbench);
  log(`throughput: ${specs.map((s) => s.name).join(', ')}; ${ROUNDS} rounds of ${SEGMENT}s each`);
  const r = await interleaved(specs, ROUNDS, SEGMENT);
  const plain = r.plain;
  rows.push(loadRow('plain', 'Plain create, no key (baseline)', plain, '1.00', 'baseline'));
  if (r.bare) {
    rows.push(
      loadRow(
        'bare',
        'HTTP ceiling: bare Express 5',
        r.bare,
        r2(ratio(plain.rps, r.bare.rps)),
        'service ÷ bare, reported',
      ),
    );
  }
  const against = (id: string, scenario: string, min: number, extra = '', ok = true) => {
    const res = r[id];
    if (!res) return;
    const v = ratio(res.rps, plain.rps);
    const row = loadRow(id, scenario, res, r2(v) + extra, `≥ ${min.toFixed(2)}`, v >= min && ok);
    rows.push(row);
  };
  against('idem-users', 'Idempotent create (users), fresh keys', 0.6);
  against('idem-orders', 'Idempotent create (orders), fresh keys', 0.6);
  results.replayCheck = { notReplayed };
  against(
    'replay',
    'Replay of existing keys',
    1.5,
    notReplayed ? ` (${notReplayed} executed again!)` : '',
    notReplayed === 0,
  );
  against(
    'payments',
    'Payment, in-process gateway, 0 latency',
    0.35,
    exhausted ? ' (orders ran out)' : '',
    !exhausted,
  );
  const idemDb = r['pgbench-idempotent'];
  const plainDb = r['pgbench-plain'];
  if (idemDb && plainDb && r['idem-users']) {
    const v = ratio(r['idem-users'].rps, idemDb.rps);
    rows.push({
      ...loadRow(
        'db-ceiling',
        'DB ceiling: pgbench, idempotent-create SQL',
        idemDb,
        r2(v),
        'service ÷ pgbench ≥ 0.50',
        v >= 0.5,
      ),
      nonFinal: idemDb.errors ? `failed×${idemDb.errors}` : '',
    });
    rows.push({
      ...loadRow(
        'db-ceiling-plain',
        'DB ceiling: pgbench, plain-create SQL',
        plainDb,
        r2(ratio(plain.rps, plainDb.rps)),
        'service ÷ pgbench, reported',
      ),
      nonFinal: plainDb.errors ? `failed×${plainDb.errors}` : '',
    });
  }
}

async function stormScenario(ctx: Context): Promise<void> {
  log(`storm: ${P.stormRounds} rounds of ${STORM_SIZE} concurrent requests with one key each`);
  const latencies: number[] = [];
  const statuses: Record<string, number> = {};
  let errors = 0;
  let durationSec = 0;
  const names: string[] = [];
  for (let round = 0; round < P.stormRounds; round++) {
    const name = `storm-${runId}-${round}`;
    names.push(name);
    const request: LoadRequest = {
      method: 'POST',
      path: '/api/v1/users',
      headers: {
        authorization: token(STORM_BASE + 1 + round, 'admin'),
        'idempotency-key': `storm-${runId}-${round}-${randomUUID()}`,
      },
      body: JSON.stringify({ name, age: 30 }),
    };
    const r = await load({
      url: ctx.server.url,
      connections: STORM_SIZE,
      amount: STORM_SIZE,
      next: () => request,
    });
    durationSec += r.durationSec;
    // Percentiles over all rounds, not per round: keep every latency.
    latencies.push(...r.samples);
    for (const [s, c] of Object.entries(r.statuses)) statuses[s] = (statuses[s] ?? 0) + c;
    errors += r.errors;
  }
  const effects = await ctx.sql.query<{ name: string; n: string }>(
    'SELECT name, count(*) AS n FROM users WHERE tenant_id = $1 AND name = ANY($2) GROUP BY name',
    [TENANT, names],
  );
  const perKey = new Map(effects.rows.map((e) => [e.name, Number(e.n)]));
  const exactlyOnce = names.filter((n) => perKey.get(n) === 1).length;
  latencies.sort((a, b) => a - b);
  const pick = (q: number) => latencies[Math.min(latencies.length - 1, Math.ceil(q * latencies.length) - 1)];
  const p99 = pick(0.99);
  const fiveXx = Object.entries(statuses)
    .filter(([s]) => Number(s) >= 500)
    .reduce((a, [, c]) => a + c, 0);
  const bound = WAIT_MS + 100;
  results.storm = {
    rounds: P.stormRounds,
    size: STORM_SIZE,
    statuses,
    errors,
    p50: pick(0.5),
    p99,
    max: latencies[latencies.length - 1],
    keysWithExactlyOneEffect: exactlyOnce,
    effectsPerKey: Object.fromEntries(perKey),
  };
  log(
    `storm: p99 ${p99.toFixed(1)} ms, statuses ${JSON.stringify(statuses)}, ${exactlyOnce}/${names.length} keys with one effect`,
  );
  const created = statuses['201'] ?? 0;
  rows.push({
    id: 'storm',
    scenario: `Duplicate storm (${STORM_SIZE} × 1 key, ${P.stormRounds} keys)`,
    rps: durationSec > 0 ? created / durationSec : Number.NaN,
    p50: pick(0.5),
    p99,
    nonFinal: nonFinal({ statuses, errors }),
    value: `p99 ${p99.toFixed(0)} ms; 5xx ${fiveXx}; ${exactlyOnce}/${names.length} keys 1 effect`,
    target: `p99 ≤ ${bound} ms, 0 5xx, 1 effect/key`,
    pass: p99 <= bound && fiveXx === 0 && errors === 0 && exactlyOnce === names.length,
  });
}

/** Orders `<prefix>-1..n`, order g owned by users[g % USERS], amount 10.50 USD. */
async function createOrders(sql: pg.Pool, prefix: string, n: number): Promise<void> {
  await sql.query(
    `INSERT INTO orders (tenant_id, user_id, merchant_order_no, amount, currency)
     SELECT $1, $2::bigint + 1 + (g % $3), $4 || '-' || g, 10.50, 'USD' FROM generate_series(1, $5::int) g`,
    [TENANT, USER_BASE, USERS, prefix, n],
  );
}

interface Counted {
  /** Client-side: pg.Client#query calls per request (one call = one round trip). */
  roundTrips: number;
  /** Server-side (pg_stat_statements): statements executed per request. */
  statements?: number;
  texts: Array<{ perRequest: number; sql: string }>;
  serverStatements?: Array<{ perRequest: number; sql: string }>;
}

interface Captures {
  idempotentCreate: { calls: CapturedCall[]; uid: number; key: string };
  plainCreate: { calls: CapturedCall[]; uid: number };
}

/**
 * Round trips per request: N requests one after the other, the service's pg query calls counted by
 * the probe, statements by pg_stat_statements. Also captures one idempotent and one plain create
 * call by call (texts and values), from which the pgbench scripts are made.
 */
async function roundTrips(ctx: Context): Promise<Captures> {
  const n = P.countN;
  const { sql, server, db } = ctx;
  // Let the previous load's in-flight requests finish: they must not be counted.
  await sleep(1000);
  const capture = async (request: LoadRequest): Promise<CapturedCall[]> => {
    await ask(server.child, { type: 'count-start', capture: true }, 'count-started');
    const sent = await sendAll(server.url, [request], 1);
    const got = await ask<{ captured?: CapturedCall[] }>(server.child, { type: 'count-stop' }, 'counts');
    if ((sent.statuses['201'] ?? 0) !== 1) throw new Error(`capture: ${JSON.stringify(sent.statuses)}`);
    // The payment recoverer may run in that window: its query is not part of the request.
    return (got.captured ?? []).filter((c) => !/lease_until < now\(\) AND operation/.test(c.text));
  };
  const measureCalls = async (name: string, requests: LoadRequest[], expect: number): Promise<Counted> => {
    if (db.statements) await sql.query('SELECT pg_stat_statements_reset()');
    await ask(server.child, { type: 'count-start' }, 'count-started');
    const sent = await sendAll(server.url, requests, 1);
    const counts = await ask<{ calls: number; texts: Array<[string, number]> }>(
      server.child,
      { type: 'count-stop' },
      'counts',
    );
    if ((sent.statuses[expect] ?? 0) !== requests.length) {
      throw new Error(`round trips ${name}: ${JSON.stringify(sent.statuses)}`);
    }
    const result: Counted = {
      roundTrips: counts.calls / requests.length,
      texts: counts.texts
        .filter(([, c]) => c >= requests.length / 2)
        .map(([s, c]) => ({ perRequest: c / requests.length, sql: s })),
    };
    if (db.statements) {
      const st = await sql.query<{ query: string; calls: string }>(
        `SELECT query, calls FROM pg_stat_statements
         WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
           AND query NOT ILIKE '%pg_stat_statements%' ORDER BY calls DESC`,
      );
      const per = st.rows
        .filter((r) => Number(r.calls) >= requests.length / 2)
        .map((r) => ({
          perRequest: Number(r.calls) / requests.length,
          sql: r.query.replace(/\s+/g, ' ').slice(0, 140),
        }));
      result.serverStatements = per;
      result.statements = per.reduce((a, r) => a + r.perRequest, 0);
    }
    log(
      `round trips ${name}: ${result.roundTrips.toFixed(2)} per request${result.statements !== undefined ? `, ${result.statements.toFixed(2)} statements` : ''}`,
    );
    return result;
  };

  const idemKey = randomUUID();
  const captures: Captures = {
    idempotentCreate: {
      uid: ADMIN_BASE + 1,
      key: idemKey,
      calls: await capture({
        method: 'POST',
        path: '/api/v1/users',
        headers: { authorization: admins[0], 'idempotency-key': idemKey },
        body: USER_BODY,
      }),
    },
    plainCreate: {
      uid: ADMIN_BASE + 1,
      calls: await capture({
        method: 'POST',
        path: '/api/v1/users',
        headers: { authorization: admins[0] },
        body: USER_BODY,
      }),
    },
  };
  if (!enabled('roundtrips')) return captures;
  const out: Record<string, Counted> = {};
  out.plainCreate = await measureCalls('plain create', Array.from({ length: n }, plainUser), 201);
  out.idempotentCreate = await measureCalls('idempotent create', Array.from({ length: n }, idemUser), 201);
  const keys = newReplayKeys(n);
  await seedKeys(server.url, keys);
  out.replay = await measureCalls('replay', keys.map(replayRequest), 201);
  out.orderCreate = await measureCalls('order create', Array.from({ length: n }, idemOrder), 201);
  await createOrders(sql, 'payc', n);
  out.paymentCreate = await measureCalls(
    'payment create',
    Array.from({ length: n }, (_, i) => ({
      method: 'POST' as const,
      path: '/api/v1/payments',
      headers: { authorization: users[(i + 1) % USERS], 'idempotency-key': randomUUID() },
      body: JSON.stringify({ merchantOrderNo: `payc-${i + 1}`, amount: '10.50' }),
    })),
    201,
  );
  results.roundTrips = out;
  return captures;
}

/**
 * pgbench segments for the interleaved rounds: the SQL of one idempotent user create and of one
 * plain create (bench/pgbench.ts), same concurrency, same database, stored response of the length
 * the service stores (measured on the records the warm-up wrote).
 */
async function pgbenchSpecs(ctx: Context, captures: Captures): Promise<Spec[]> {
  const setup = [
    `\\set pgb_uid random(${ADMIN_BASE + 1}, ${ADMIN_BASE + ADMINS})`,
    '\\set pgb_key random(1, 9000000000000000000)',
  ];
  const { idempotentCreate: idem, plainCreate: plain } = captures;
  const uidSubs = (uid: number): Substitution[] => [{ value: String(uid), expression: "':pgb_uid'" }];
  const scripts = {
    idempotent: scriptFromCapture(idem.calls, setup, [
      {
        value: `${TENANT}:${idem.uid}:users.create:${idem.key}`,
        expression: `('${TENANT}:' || :pgb_uid || ':users.create:pgb-' || :pgb_key)`,
      },
      { value: `${TENANT}:${idem.uid}`, expression: `('${TENANT}:' || :pgb_uid)` },
      ...uidSubs(idem.uid),
    ]),
    plain: scriptFromCapture(plain.calls, setup.slice(0, 1), uidSubs(plain.uid)),
  };
  results.pgbench = {
    command: `pgbench -n -c ${CONNECTIONS} -j 2 -T <segment> -f <script> -l`,
    scripts,
  };
  const spec = (name: string, script: string): Spec => ({
    name,
    url: ctx.db.url,
    next: plainUser,
    run: async (seconds) => {
      const r: PgbenchResult = await runPgbench({
        url: ctx.db.url,
        password: ctx.db.password,
        script,
        name,
        clients: CONNECTIONS,
        seconds: Math.max(1, Math.round(seconds)),
      });
      const samples = Float64Array.from(r.latencies);
      const out: Omit<LoadResult, 'samples'> = {
        durationSec: r.durationSec,
        responses: r.transactions,
        created: r.transactions,
        rps: r.tps,
        p50: r.p50,
        p90: percentile(samples, 0.9),
        p99: r.p99,
        max: samples.length ? samples[samples.length - 1] : Number.NaN,
        statuses: {},
        errors: r.failed,
      };
      return Object.defineProperty(out, 'samples', { value: samples, enumerable: false }) as LoadResult;
    },
  });
  return [spec('pgbench-idempotent', scripts.idempotent), spec('pgbench-plain', scripts.plain)];
}

const rowsLabel = (n: number) => (n >= 1e6 ? `${(n / 1e6).toFixed(1)}M` : `${Math.round(n / 1e3)}k`);

let fillSeq = 0;
/** Records of other users (`<tenant>:<n % 5000>`), random-looking keys, a stored body of realistic size. */
async function fill(sql: pg.Pool, tenant: string, rows: number, expiresIn: string): Promise<void> {
  const t = Date.now();
  const chunk = 250_000;
  for (let done = 0; done < rows; done += chunk) {
    const from = fillSeq + 1;
    const to = fillSeq + Math.min(chunk, rows - done);
    fillSeq = to;
    await sql.query(
      `INSERT INTO idempotency_records
         (scope_key, request_hash, status, resource_id, response_body, http_status, user_scope, operation,
          created_at, updated_at, expires_at)
       SELECT $3 || ':' || (g % 5000) || ':users.create:' || md5(g::text), md5(g::text) || md5((-g)::text),
              'SUCCEEDED', g::text, repeat('x', 600), 201, $3 || ':' || (g % 5000), 'users.create',
              now(), now(), now() + $4::interval
       FROM generate_series($1::int, $2::int) g`,
      [from, to, tenant, expiresIn],
    );
  }
  log(`filled ${rows} ${tenant} records in ${((Date.now() - t) / 1000).toFixed(1)}s`);
}

/** After a bulk fill: statistics and visibility map up to date, dirty pages flushed (no checkpoint mid-run). */
async function settle(sql: pg.Pool): Promise<void> {
  const t = Date.now();
  await sql.query('VACUUM (ANALYZE) idempotency_records');
  await sql.query('CHECKPOINT').catch(() => {});
  log(`vacuum + checkpoint in ${((Date.now() - t) / 1000).toFixed(1)}s`);
}

async function explain(sql: pg.Pool, text: string, params: unknown[]): Promise<string> {
  const c = await sql.connect();
  try {
    await c.query('BEGIN');
    const r = await c.query(`EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) ${text}`, params);
    return r.rows.map((x: Record<string, string>) => x['QUERY PLAN']).join('\n');
  } finally {
    await c.query('ROLLBACK').catch(() => {});
    c.release();
  }
}

/** The Mode A claim's INSERT (idempotency/record-store.ts claimLocal), for EXPLAIN ANALYZE. */
const claimSql = (
  maxRetained: number,
) => `INSERT INTO idempotency_records (scope_key, request_hash, status, user_scope, operation, expires_at)
SELECT $1::varchar, $2::varchar, 'PROCESSING', $3::varchar, 'users.create', now() + make_interval(secs => 86400)
WHERE (SELECT count(*) FROM (SELECT 1 FROM idempotency_records WHERE user_scope = $3::varchar AND expires_at > now()
        LIMIT ${maxRetained}) r) < ${maxRetained}
  AND (SELECT count(*) FROM (SELECT 1 FROM idempotency_records WHERE user_scope = $3::varchar AND status = 'PROCESSING'
        LIMIT ${MAX_IN_FLIGHT}) p) < ${MAX_IN_FLIGHT}
ON CONFLICT (scope_key) DO NOTHING RETURNING 1`;
/** The default IDEMPOTENCY_MAX_RETAINED: what the retained-cap count costs a user close to it. */
const DEFAULT_MAX_RETAINED = 10_000;
const READ_SQL = `SELECT request_hash AS "requestHash", status, resource_id AS "resourceId", response_body AS "responseBody",
        http_status AS "httpStatus", owner_token AS "ownerToken",
        (lease_until IS NOT NULL AND lease_until < now()) AS "leaseExpired", (expires_at < now()) AS expired
 FROM idempotency_records WHERE scope_key = $1`;
const PURGE_SQL = `WITH doomed AS (
   SELECT scope_key FROM idempotency_records
   WHERE expires_at < now() AND status <> 'PROCESSING'
   ORDER BY expires_at LIMIT 500 FOR UPDATE SKIP LOCKED)
 , gone AS (DELETE FROM idempotency_records r USING doomed d WHERE r.scope_key = d.scope_key RETURNING 1)
 SELECT count(*) AS n FROM gone`;

async function growthScenario(ctx: Context): Promise<void> {
  const { sql, server } = ctx;
  log('growth: emptying idempotency_records');
  await sql.query('TRUNCATE idempotency_records');
  const keys = newReplayKeys(P.growthSeeds);
  await fill(sql, 'fill', P.growthSmall - keys.length, '24 hours');
  await seedKeys(server.url, keys);
  await settle(sql);
  // Replay and create at each table size, interleaved with plain create as a control: plain create
  // never touches idempotency_records, so its drift between the two phases is the machine's (other
  // load, JIT), not the table's. The target is judged on the ratio corrected by that drift.
  const phase = async (label: string) => {
    const rowsNow = await count(sql, 'SELECT count(*) AS n FROM idempotency_records');
    let i = 0;
    const r = await interleaved(
      [
        {
          name: `growth-replay-${label}`,
          url: server.url,
          next: () => replayRequest(keys[i++ % keys.length]),
        },
        { name: `growth-create-${label}`, url: server.url, next: idemUser },
        { name: `growth-control-${label}`, url: server.url, next: plainUser },
      ],
      P.growthRounds,
      P.growthSegment,
    );
    return {
      rows: rowsNow,
      replay: r[`growth-replay-${label}`],
      create: r[`growth-create-${label}`],
      control: r[`growth-control-${label}`],
    };
  };
  const small = await phase('small');
  const current = await count(sql, 'SELECT count(*) AS n FROM idempotency_records');
  await fill(sql, 'fill', P.growthBig - current, '24 hours');
  await settle(sql);
  const user = `${TENANT}:${ADMIN_BASE + 1}`;
  // A user just under the default retained cap: the claim counts up to 10 000 of its records.
  const heavy = `${TENANT}:${ADMIN_BASE - 1}`;
  await sql.query(
    `INSERT INTO idempotency_records (scope_key, request_hash, status, resource_id, response_body, http_status,
       user_scope, operation, expires_at)
     SELECT $1 || ':users.create:' || md5(g::text), md5(g::text) || md5(g::text), 'SUCCEEDED', g::text, repeat('x', 600),
            201, $1, 'users.create', now() + interval '24 hours'
     FROM generate_series(1, $2::int) g`,
    [heavy, DEFAULT_MAX_RETAINED - 10],
  );
  // Statistics, no VACUUM: a busy user's records are recent, so not yet all-visible.
  await sql.query('ANALYZE idempotency_records');
  const explains = {
    claim: await explain(sql, claimSql(MAX_RETAINED), [
      `${user}:users.create:explain-${runId}`,
      'x'.repeat(64),
      user,
    ]),
    claimUserNearDefaultCap: await explain(sql, claimSql(DEFAULT_MAX_RETAINED), [
      `${heavy}:users.create:explain-${runId}`,
      'x'.repeat(64),
      heavy,
    ]),
    replayRead: await explain(sql, READ_SQL, [
      `${TENANT}:${ADMIN_BASE + 1 + keys[0].admin}:users.create:${keys[0].key}`,
    ]),
  };
  const big = await phase('big');
  const drift = ratio(big.control.p50, small.control.p50);
  results.growth = { rows: { small: small.rows, big: big.rows }, controlDrift: drift, explain: explains };
  for (const kind of ['replay', 'create'] as const) {
    const raw = ratio(big[kind].p50, small[kind].p50);
    const v = raw / drift;
    rows.push(
      loadRow(
        `growth-${kind}`,
        `Growth ${kind}: p50 at ${rowsLabel(big.rows)} ÷ ${rowsLabel(small.rows)} rows`,
        big[kind],
        `${r2(v)} (raw ${r2(raw)}, control ${r2(drift)})`,
        '≤ 1.20',
        v <= 1.2,
      ),
    );
  }
}

async function purgeScenario(ctx: Context): Promise<void> {
  const { sql, server, db } = ctx;
  await fill(sql, 'expired', P.purgeRows, '-1 hour');
  await settle(sql);
  const total = await count(sql, 'SELECT count(*) AS n FROM idempotency_records');
  const explainPurge = await explain(sql, PURGE_SQL, []);
  const quiet = await measure('purge-off', server.url, P.short, idemUser);
  // The engine's own purge function, back to back (a purge catching up), on its own connection.
  const sequelize: Sequelize = createSequelize(db.url, 2);
  let stop = false;
  let purged = 0;
  const started = Date.now();
  let purgeSeconds = Number.NaN;
  const purging = (async () => {
    try {
      while (!stop) {
        // purgeExpired's own loop runs its batches back to back; with --purge-pause-ms the
        // benchmark runs one batch at a time and pauses in between (a proposal, measured).
        const n = await purgeExpired(sequelize, 500, PURGE_PAUSE_MS > 0 ? 1 : 10);
        purged += n;
        if (n === 0) break;
        if (PURGE_PAUSE_MS > 0) await sleep(PURGE_PAUSE_MS);
      }
      purgeSeconds = (Date.now() - started) / 1000;
    } finally {
      await sequelize.close();
    }
  })();
  log(`purge: deleting ${P.purgeRows} expired records (of ${total}) under load`);
  const during = await measure('purge-on', server.url, P.purgeMax, idemUser, { stopWhen: purging });
  stop = true;
  await purging;
  const left = await count(
    sql,
    "SELECT count(*) AS n FROM idempotency_records WHERE expires_at < now() AND status <> 'PROCESSING'",
  );
  results.purge = {
    rowsInTable: total,
    purged,
    left,
    purgeSeconds,
    rowsPerSecond: purged / ((Date.now() - started) / 1000),
    off: quiet,
    on: during,
    explain: explainPurge,
  };
  log(`purge: ${purged} rows in ${purgeSeconds.toFixed(1)}s, ${left} left`);
  const v = ratio(during.p99, quiet.p99);
  const row = loadRow(
    'purge',
    `Purge ${rowsLabel(purged)} expired under create load: p99 ÷ p99 without`,
    during,
    r2(v),
    '≤ 1.50',
    v <= 1.5 && left === 0,
  );
  if (left > 0) row.value += ` (${left} not purged in ${P.purgeMax}s)`;
  rows.push(row);
}

// ---------------------------------------------------------------------------------------------

const loadText = (l: unknown) =>
  Array.isArray(l) ? (l as number[]).map((v) => v.toFixed(2)).join(' ') : '?';

async function report(ctx: Context): Promise<void> {
  const table = renderTable(rows);
  const rt = results.roundTrips as Record<string, Counted> | undefined;
  const lines = [
    '',
    `Idempotency benchmark — ${QUICK ? 'quick' : 'full'} run, ${CONNECTIONS} connections, ${os.cpus().length} CPUs (${os.cpus()[0]?.model.trim()}), Node ${process.version}, PostgreSQL ${ctx.db.version} (${ctx.db.origin})`,
    `commit ${GIT.commit ?? '?'}${GIT.dirty?.length ? ` + uncommitted changes in ${GIT.dirty.length} service file(s)` : ''}; load average ${loadText(results.loadAverageAtStart)} at start, ${loadText(results.loadAverageAtEnd)} at end`,
    '',
    table,
    '',
  ];
  if (cpuTable.length > 0) {
    lines.push('CPU time per final answer (ms; pgbench: per transaction), by process:');
    lines.push(
      `  ${'scenario'.padEnd(20)} ${'service'.padStart(8)} ${'postgres'.padStart(9)} ${'load gen'.padStart(9)}`,
    );
    const f = (v: number) => (Number.isFinite(v) ? v.toFixed(3) : '–');
    for (const c of cpuTable) {
      lines.push(
        `  ${c.name.padEnd(20)} ${f(c.service).padStart(8)} ${f(c.postgres).padStart(9)} ${f(c.loadGenerator).padStart(9)}`,
      );
    }
    lines.push('');
  }
  if (rt) {
    lines.push(
      'Database round trips per request (pg query calls in the service; statements from pg_stat_statements):',
    );
    for (const [name, c] of Object.entries(rt)) {
      lines.push(
        `  ${name.padEnd(17)} ${c.roundTrips.toFixed(2)} round trips${c.statements !== undefined ? `, ${c.statements.toFixed(2)} statements` : ''}`,
      );
      for (const t of c.texts) lines.push(`      ${t.perRequest.toFixed(2)} × ${t.sql}`);
    }
    lines.push('');
  }
  process.stdout.write(`${lines.join('\n')}\n`);
  const file = path.join(ROOT, 'bench', 'results', `${stamp()}${QUICK ? '-quick' : ''}.json`);
  await mkdir(path.dirname(file), { recursive: true });
  await writeFile(
    file,
    `${JSON.stringify(
      {
        meta: {
          date: new Date().toISOString(),
          mode: QUICK ? 'quick' : 'full',
          only: ONLY ?? null,
          experiments: {
            serverEnv: SERVER_ENV,
            purgePauseMs: PURGE_PAUSE_MS,
            profiled: PROFILE,
          },
          connections: CONNECTIONS,
          durations: { rounds: ROUNDS, segment: SEGMENT, short: P.short, warmup: P.warmup },
          cpus: os.cpus().length,
          cpuModel: os.cpus()[0]?.model,
          memoryGb: Math.round(os.totalmem() / 2 ** 30),
          node: process.version,
          postgres: ctx.db.version,
          database: ctx.db.origin,
          pgStatStatements: ctx.db.statements,
          elapsedSec: (Date.now() - t0) / 1000,
          git: GIT,
          loadAverage: { start: results.loadAverageAtStart, end: results.loadAverageAtEnd },
        },
        rows,
        cpuMsPerRequest: cpuTable,
        results,
      },
      null,
      2,
    )}\n`,
  );
  log(`results written to ${path.relative(ROOT, file)} (${((Date.now() - t0) / 1000).toFixed(0)}s in all)`);
}

try {
  await main();
} catch (err) {
  log(`failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
  process.exitCode = 1;
} finally {
  await cleanup();
}
// Nothing of ours may keep running: children were stopped above; pids are SIGKILLed on exit.
await sleep(10);
process.exit(process.exitCode ?? 0);

import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import type { BenchRun, ReplayKey } from './bench-run.js';
import { type LoadRequest, type LoadResult, load, nonFinal, percentile } from './load.js';
import { ask, type Child, cpuOf, memoryOf, postgresCpuOf } from './processes.js';
import { summariseProfiles } from './profile-summary.js';
import { median, type Row, r2, ratio } from './report.js';
import { TENANT, USER_BASE, USERS } from './settings.js';

/** Measuring helpers shared by the scenarios: load, CPU, memory, seeding, SQL. */
export interface Cpu {
  service: number;
  postgres: number;
  /** This process (autocannon) plus its exited children (pgbench). */
  loadGenerator: number;
  /** The gateway simulator's process (its own, on the same CPUs: counted apart from the service). */
  gateway: number;
}
/** CPU time used so far (ms) by the service, PostgreSQL (embedded only), the load generators and the gateway simulator. */

export function cpuNow(ctx: BenchRun, servicePid = ctx.serverChild?.pid): Cpu {
  const self = process.cpuUsage();
  return {
    service: servicePid ? cpuOf(servicePid) : Number.NaN,
    postgres: ctx.postmasterPid ? postgresCpuOf(ctx.postmasterPid) : Number.NaN,
    loadGenerator: (self.user + self.system) / 1000 + childrenCpuOfSelf(),
    gateway: ctx.gatewayPid ? cpuOf(ctx.gatewayPid) : Number.NaN,
  };
}

export function childrenCpuOfSelf(): number {
  try {
    const raw = readFileSync('/proc/self/stat', 'utf8');
    const f = raw.slice(raw.lastIndexOf(')') + 2).split(' ');
    return (Number(f[13]) + Number(f[14])) * 10;
  } catch {
    return 0;
  }
}

export async function measure(
  ctx: BenchRun,
  name: string,
  url: string,
  seconds: number,
  next: () => LoadRequest,
  extra: Partial<Parameters<typeof load>[0]> = {},
): Promise<LoadResult> {
  const { CONNECTIONS, PROFILE, PROFILE_DIR, log, results, profiles } = ctx;
  log(`${name}: ${seconds}s at ${CONNECTIONS} connections`);
  // --profile: a V8 CPU profile of the service during this scenario (the service only).
  const profiled = PROFILE && ctx.serverChild !== undefined && url === ctx.serverChild.url;
  if (profiled && ctx.serverChild)
    await ask(ctx.serverChild.child, { type: 'profile-start' }, 'profile-started');
  const r = await load({ url, connections: CONNECTIONS, duration: seconds, next, ...extra });
  if (profiled && ctx.serverChild) {
    const file = path.join(PROFILE_DIR, `${name}.cpuprofile`);
    await ask(ctx.serverChild.child, { type: 'profile-stop', file }, 'profile-stopped', 60000);
    profiles[name] = (await summariseProfiles(file, log))[0];
  }
  log(
    `${name}: ${r.rps.toFixed(0)} req/s (201), p50 ${r.p50.toFixed(1)} ms, p99 ${r.p99.toFixed(1)} ms${nonFinal(r) ? `, non-201 ${nonFinal(r)}` : ''}`,
  );
  results[name] = r;
  return r;
}

export function loadRow(
  id: string,
  scenario: string,
  r: Pick<LoadResult, 'rps' | 'p50' | 'p99' | 'statuses' | 'errors' | 'final'>,
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
export async function sendAll(
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

export async function seedKeys(ctx: BenchRun, url: string, keys: ReplayKey[]): Promise<void> {
  const { CONNECTIONS, replayRequest } = ctx;
  // As a client of the protocol would: a 202 or 503 (a bounded wait ended on a busy machine) is
  // sent again with the same key until the key's answer is final (201, or its replay).
  const seeded = await sendAll(url, keys.map(replayRequest), CONNECTIONS);
  let missing = keys.length - (seeded.statuses['201'] ?? 0);
  for (let attempt = 0; missing > 0 && attempt < 5; attempt++) {
    const again = await sendAll(url, keys.map(replayRequest), CONNECTIONS);
    missing = keys.length - (again.statuses['201'] ?? 0);
  }
  if (missing > 0) throw new Error(`seeding replay keys: ${missing} of ${keys.length} never answered 201`);
}

export async function count(sql: pg.Pool, text: string, params: unknown[] = []): Promise<number> {
  return Number((await sql.query(text, params)).rows[0]?.n ?? 0);
}

/** Inserts, updates (HOT or not) and deletes per table so far: what each write costs in indexes. */
export async function tableStats(sql: pg.Pool): Promise<unknown> {
  const r = await sql.query(
    `SELECT relname AS table, n_tup_ins AS inserted, n_tup_upd AS updated, n_tup_hot_upd AS hot_updated,
            n_tup_del AS deleted, n_live_tup AS live, n_dead_tup AS dead
     FROM pg_stat_user_tables WHERE relname IN ('users', 'idempotency_records', 'idempotency_slots', 'orders', 'payments', 'refunds', 'events')
     ORDER BY relname`,
  );
  return r.rows;
}

/** V8's view (heap, external) from the probe, and the kernel's (RSS: anonymous vs file-backed). */
export async function serverMemory(server: Child, gc: boolean): Promise<unknown> {
  const v8 = await ask(server.child, { type: 'memory', gc }, 'memory-usage').catch(() => undefined);
  return { v8, proc: memoryOf(server.pid) };
}

export interface Spec {
  name: string;
  url: string;
  next: () => LoadRequest;
  inspect?: (status: number, headers: Record<string, string | string[]>) => void;
  /** Instead of autocannon (pgbench). */
  run?: (seconds: number) => Promise<LoadResult>;
  /** The HTTP status of a final answer (default 201; a tRPC mutation answers 200). */
  final?: number;
  /** Whose CPU the "service" column counts (default: the service; the bare Express process for bare). */
  pid?: number;
  /** Before each of its segments, untimed (e.g. the outbox what-if switches the event triggers). */
  before?: () => Promise<void>;
}

/** Joins the segments of one scenario measured in several rounds. */

export function combine(parts: LoadResult[]): LoadResult {
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
    ...(parts[0]?.final === undefined ? {} : { final: parts[0].final }),
  };
  return Object.defineProperty(out, 'samples', { value: samples, enumerable: false }) as LoadResult;
}

/** An arm of `interleaved`: its rounds combined, and each round's rate in order. */
export type Interleaved = LoadResult & { roundRps: number[] };

/**
 * Arm a's rate ÷ arm b's as a row shows it: the ratio of totals (what a target judges), and beside it
 * the median over rounds of a's rate ÷ b's in the same round, which one disturbed segment (an
 * autovacuum, a checkpoint) moves less.
 */
export function armsRatio(a: Interleaved, b: Interleaved): { value: number; text: string } {
  const value = ratio(a.rps, b.rps);
  const rounds = median(a.roundRps.map((rps, i) => ratio(rps, b.roundRps[i]))) ?? Number.NaN;
  return { value, text: `${r2(value)} (median of rounds ${r2(rounds)})` };
}

/**
 * The throughput scenarios, interleaved: `rounds` rounds, each running every scenario for
 * `seconds`. Machine load and JIT warm-up drift over a run; interleaving spreads that drift over
 * the baseline and the scenarios compared with it alike, so the ratios hold within one run.
 *
 * Each scenario first runs once untimed (`P.warmup` seconds). The first segment of a route pays its
 * first use (the JIT of its code, each pooled connection's plans, a fill's aftermath), and without
 * this pass it fell on whichever scenario comes first in round 1, every run: the outbox's arm with the
 * events on ran its first segment at about 0.62 of its later ones, with the events' trigger on or off.
 */
export async function interleaved(
  ctx: BenchRun,
  specs: Spec[],
  rounds: number,
  seconds: number,
): Promise<Record<string, Interleaved>> {
  const { CONNECTIONS, PROFILE, PROFILE_DIR, log, results, segmentMemory, cpuTable, profiles } = ctx;
  const parts: Record<string, LoadResult[]> = {};
  const cpu: Record<string, Cpu> = {};
  const wal: Record<string, { bytes: number; checkpoints: number }> = {};
  // A checkpoint now, before the warm-up: the warm-up then pays the full-page images of the pages
  // every scenario touches, and no checkpoint falls in a segment (the bench's server waits 30 min
  // between timed ones, postgres.ts). One landing in a segment cost that segment alone up to a third
  // of its answers.
  await ctx.sql
    .query('CHECKPOINT')
    .catch((err: Error) => log(`no CHECKPOINT before the rounds: ${err.message}`));
  for (const spec of specs) {
    if (spec.run) continue; // pgbench: no route of the service to warm
    await spec.before?.();
    await load({
      url: spec.url,
      connections: CONNECTIONS,
      duration: ctx.P.warmup,
      next: spec.next,
      final: spec.final,
    });
  }
  for (let round = 0; round < rounds; round++) {
    // Each round starts one scenario further on, so that no scenario always follows the same one.
    const order = specs.map((_, i) => specs[(i + round) % specs.length]);
    for (const spec of order) {
      const last = round === rounds - 1;
      const profiled = PROFILE && last && ctx.serverChild !== undefined && spec.url === ctx.serverChild.url;
      if (profiled && ctx.serverChild)
        await ask(ctx.serverChild.child, { type: 'profile-start' }, 'profile-started');
      await spec.before?.();
      const walBefore = await walNow(ctx.sql);
      const before = cpuNow(ctx, spec.pid);
      const r = spec.run
        ? await spec.run(seconds)
        : await load({
            url: spec.url,
            connections: CONNECTIONS,
            duration: seconds,
            next: spec.next,
            inspect: spec.inspect,
            final: spec.final,
          });
      const after = cpuNow(ctx, spec.pid);
      const written = await walSince(ctx.sql, walBefore);
      if (written) {
        const w = wal[spec.name] ?? { bytes: 0, checkpoints: 0 };
        w.bytes += written.bytes;
        w.checkpoints += written.checkpoints;
        wal[spec.name] = w;
      }
      if (ctx.serverChild) {
        const m = memoryOf(ctx.serverChild.pid);
        segmentMemory.push({ after: `${spec.name} ${round + 1}`, hwmMb: m?.hwmMb, rssMb: m?.rssMb });
      }
      const used = cpu[spec.name] ?? { service: 0, postgres: 0, loadGenerator: 0, gateway: 0 };
      for (const k of ['service', 'postgres', 'loadGenerator', 'gateway'] as const)
        used[k] += after[k] - before[k];
      cpu[spec.name] = used;
      if (profiled && ctx.serverChild) {
        const file = path.join(PROFILE_DIR, `${spec.name}.cpuprofile`);
        await ask(ctx.serverChild.child, { type: 'profile-stop', file }, 'profile-stopped', 60000);
        profiles[spec.name] = (await summariseProfiles(file, log))[0];
      }
      log(
        `${spec.name} [round ${round + 1}/${rounds}]: ${r.rps.toFixed(0)} ${spec.run ? 'tps' : 'req/s'}, p50 ${r.p50.toFixed(1)} ms, p99 ${r.p99.toFixed(1)} ms${nonFinal(r) ? `, non-final ${nonFinal(r)}` : ''}${written ? `, WAL ${(written.bytes / Math.max(1, r.created)).toFixed(0)} B/answer${written.checkpoints ? ', a checkpoint ended in it' : ''}` : ''}`,
      );
      const list = parts[spec.name] ?? [];
      list.push(r);
      parts[spec.name] = list;
    }
  }
  const out: Record<string, Interleaved> = {};
  for (const [name, list] of Object.entries(parts)) {
    // Added to combine's object, not spread: a spread would drop its non-enumerable `samples`.
    out[name] = Object.assign(combine(list), { roundRps: list.map((r) => r.rps) });
    const per = (ms: number) => Math.round((ms / Math.max(1, out[name].created)) * 1000) / 1000;
    const used = cpu[name];
    const cpuMsPerRequest = {
      service: per(used.service),
      postgres: per(used.postgres),
      loadGenerator: per(used.loadGenerator),
      gateway: per(used.gateway),
    };
    cpuTable.push({ name, ...cpuMsPerRequest });
    const w = wal[name];
    const walPerAnswer = w && {
      bytes: Math.round(w.bytes / Math.max(1, out[name].created)),
      checkpointsEnded: w.checkpoints,
    };
    const { roundRps, ...combined } = out[name];
    results[name] = {
      ...combined,
      rounds: roundRps.map(Math.round),
      cpuMsPerRequest,
      walPerAnswer,
    };
  }
  return out;
}

interface WalReading {
  lsn: string;
  /** The last checkpoint's redo point, from the control file: it moves when a checkpoint ends. */
  redo: string;
}

/** Where the server's WAL stands (exact: the statistics' WAL counters lag by up to a second). */
async function walNow(sql: pg.Pool): Promise<WalReading | undefined> {
  try {
    const { rows } = await sql.query<WalReading>(
      'SELECT pg_current_wal_lsn()::text AS lsn, (SELECT redo_lsn::text FROM pg_control_checkpoint()) AS redo',
    );
    return rows[0];
  } catch {
    return undefined; // a role without the rights (a server not the bench's own): not reported
  }
}

/** WAL written since `since` (the whole server's, by the server's own arithmetic), and whether a checkpoint ended. */
async function walSince(
  sql: pg.Pool,
  since: WalReading | undefined,
): Promise<{ bytes: number; checkpoints: number } | undefined> {
  if (!since) return undefined;
  try {
    const { rows } = await sql.query<{ bytes: number; redo: string }>(
      `SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1::pg_lsn)::float8 AS bytes,
              (SELECT redo_lsn::text FROM pg_control_checkpoint()) AS redo`,
      [since.lsn],
    );
    return { bytes: rows[0].bytes, checkpoints: rows[0].redo === since.redo ? 0 : 1 };
  } catch {
    return undefined;
  }
}

/** `n` orders of the bench's users, inserted in one statement (each writes its order.created event). */
export async function createOrders(_ctx: BenchRun, sql: pg.Pool, prefix: string, n: number): Promise<void> {
  await sql.query(
    `INSERT INTO orders (tenant_id, user_id, merchant_order_no, amount, currency)
     SELECT $1, $2::bigint + 1 + (g % $3), $4 || '-' || g, 10.50, 'USD' FROM generate_series(1, $5::int) g`,
    [TENANT, USER_BASE, USERS, prefix, n],
  );
}

/**
 * `n` orders inserted to be paid (`<prefix>-1` … `<prefix>-n`, owned as createOrders spreads them), and
 * the payment of order g by its owner with a fresh key. `next()` pays them in turn; once all are paid
 * it starts over (those answer 409) and `exhausted()` says so.
 */
export async function ordersToPay(
  ctx: BenchRun,
  prefix: string,
  n: number,
): Promise<{ pay: (g: number) => LoadRequest; next: () => LoadRequest; exhausted: () => boolean }> {
  await createOrders(ctx, ctx.sql, prefix, n);
  let paid = 0;
  const pay = (g: number): LoadRequest => ({
    method: 'POST',
    path: '/api/v1/payments',
    headers: { authorization: ctx.users[g % USERS], 'idempotency-key': randomUUID() },
    body: JSON.stringify({ merchantOrderNo: `${prefix}-${g}`, amount: '10.50' }),
  });
  return { pay, next: () => pay((paid++ % n) + 1), exhausted: () => paid > n };
}

export const rowsLabel = (n: number) => (n >= 1e6 ? `${(n / 1e6).toFixed(1)}M` : `${Math.round(n / 1e3)}k`);

/** Records of other users (`<tenant>:<n % 5000>`), random-looking keys, a stored body of realistic size. */
export async function fill(
  ctx: BenchRun,
  sql: pg.Pool,
  tenant: string,
  rows: number,
  expiresIn: string,
): Promise<void> {
  const { log } = ctx;
  const t = Date.now();
  const from = ctx.fillSeq + 1;
  ctx.fillSeq += Math.max(0, rows);
  await fillRecords(sql, tenant, from, ctx.fillSeq, expiresIn);
  log(`filled ${rows} ${tenant} records in ${((Date.now() - t) / 1000).toFixed(1)}s`);
}

/**
 * `fill`'s records numbered `from`..`to`, counted on their users' slot rows as the engine's claims
 * count them; in statements of 250,000 records at most.
 */
export async function fillRecords(
  sql: pg.Pool,
  tenant: string,
  from: number,
  to: number,
  expiresIn: string,
): Promise<void> {
  const chunk = 250_000;
  for (let first = from; first <= to; first += chunk)
    await fillChunk(sql, tenant, first, Math.min(to, first + chunk - 1), expiresIn);
}

async function fillChunk(
  sql: pg.Pool,
  tenant: string,
  from: number,
  to: number,
  expiresIn: string,
): Promise<void> {
  await sql.query(
    `INSERT INTO idempotency_records
       (scope_key, request_hash, status, resource_id, response_body, http_status, user_scope, operation,
        created_at, updated_at, expires_at, slot)
     SELECT $3 || ':' || (g % 5000) || ':users.create:' || md5(g::text), md5(g::text) || md5((-g)::text),
            'SUCCEEDED', g::text, repeat('x', 600), 201, $3 || ':' || (g % 5000), 'users.create',
            now(), now(), now() + $4::interval, 1
     FROM generate_series($1::int, $2::int) g`,
    [from, to, tenant, expiresIn],
  );
  await sql.query(
    `INSERT INTO idempotency_slots (user_scope, slot, retained)
     SELECT $3 || ':' || (g % 5000), 1, count(*) FROM generate_series($1::int, $2::int) g GROUP BY 1
     ON CONFLICT (user_scope, slot) DO UPDATE SET retained = idempotency_slots.retained + EXCLUDED.retained`,
    [from, to, tenant],
  );
}

/**
 * An A/B side's database filled from empty with `records` of the growth scenario's records
 * (`fillRecords`), then vacuumed, analysed and checkpointed: two databases filled so compare alike.
 */
export async function fillDatabase(url: string, records: number): Promise<void> {
  const pool = new pg.Pool({ connectionString: url, max: 1 });
  try {
    await fillRecords(pool, 'fill', 1, records, '24 hours');
    await pool.query('VACUUM (ANALYZE) idempotency_records');
    await pool.query('CHECKPOINT');
  } finally {
    await pool.end();
  }
}

/** After a bulk fill: statistics and visibility map up to date, dirty pages flushed (no checkpoint mid-run). */
export async function settle(ctx: BenchRun, sql: pg.Pool): Promise<void> {
  const { log } = ctx;
  const t = Date.now();
  await sql.query('VACUUM (ANALYZE) idempotency_records');
  await sql.query('CHECKPOINT').catch(() => {});
  log(`vacuum + checkpoint in ${((Date.now() - t) / 1000).toFixed(1)}s`);
}

export async function explain(sql: pg.Pool, text: string, params: unknown[], settings = ''): Promise<string> {
  const c = await sql.connect();
  try {
    await c.query('BEGIN');
    // The statement's own SET LOCALs (e.g. the purge's plan settings), in the same transaction.
    if (settings) await c.query(settings);
    const r = await c.query(`EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) ${text}`, params);
    return r.rows.map((x: Record<string, string>) => x['QUERY PLAN']).join('\n');
  } finally {
    await c.query('ROLLBACK').catch(() => {});
    c.release();
  }
}

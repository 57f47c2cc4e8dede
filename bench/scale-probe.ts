// Scale probe: order-create throughput and latency with 1 instance (direct and behind nginx) and
// 3 instances behind nginx (deploy/nginx.conf), all on one PostgreSQL, plus the database connections
// and the CPU each part used. Loopback only; every point is bounded (warm-up + duration seconds).
// Measures and prints; asserts nothing (docs/SCALING.md holds a run's numbers).
//
//   node --import tsx bench/scale-probe.ts [--duration 10] [--warmup 3] [--connections 32]
//        [--points 1-direct,1-nginx,2-nginx,3-nginx] [--rounds 1]
//        [--admin-url postgres://postgres@127.0.0.1:5432/test] [--target single|cluster]
//
// --target cluster runs the same points on deploy/ha's replicated PostgreSQL (3 members under Patroni,
// synchronous replication, HAProxy, the instances through PgBouncer in transaction mode), started
// for the run and stopped after it (docs/SCALING.md compares the two).
//
// Points are `<instances>-direct` (one instance, no balancer) or `<instances>-nginx`. With --rounds N
// the points run interleaved N times and a median row per point follows. "rest of machine" is the CPU
// the machine spent outside the measured processes (PostgreSQL's background processes, the kernel,
// anything else running): a large value means the run was disturbed.
//
// The admin URL's server gets a scratch database for the run, dropped at the end; when it is not
// reachable, a throw-away embedded PostgreSQL is used instead.
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { type EmbeddedDatabase, startEmbeddedPostgres } from '../core/embedded-postgres.js';
import { type Cluster, startCluster } from '../deploy/ha/cluster.js';
import { findNginx, type Nginx, startNginx } from '../deploy/nginx.js';
import { startGatewaySimulator } from '../gateway/simulator.js';
import { signToken } from '../routers/auth/jwt.js';
import { stablePort } from '../test/support/stable-port.js';

interface AutocannonResult {
  requests: { average: number; total: number };
  latency: { p50: number; p99: number; average: number; max: number };
  errors: number;
  timeouts: number;
  non2xx: number;
  '2xx': number;
}
type Autocannon = (opts: object) => Promise<AutocannonResult>;
const autocannon = createRequire(import.meta.url)('autocannon') as Autocannon;

const ROOT = path.resolve(import.meta.dirname, '..');
const { values: args } = parseArgs({
  options: {
    duration: { type: 'string', default: '10' },
    warmup: { type: 'string', default: '3' },
    connections: { type: 'string', default: '32' },
    points: { type: 'string', default: '1-direct,1-nginx,2-nginx,3-nginx' },
    rounds: { type: 'string', default: '1' },
    'admin-url': { type: 'string', default: 'postgres://postgres@127.0.0.1:5432/test' },
    target: { type: 'string', default: 'single' },
  },
});
const DURATION = Number(args.duration);
const WARMUP = Number(args.warmup);
const CONNECTIONS = Number(args.connections);
const USERS = 500;
const SECRETS = {
  JWT_SECRET: 'scale-probe-jwt-secret-0123456789',
  IDEMPOTENCY_HMAC_KEY: 'scale-probe-hmac-key-0123456789',
  RESPONSE_ENCRYPTION_KEY: Buffer.alloc(32, 5).toString('base64'),
};
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** CPU seconds (user + system) a process has used so far; 0 once it is gone. */
function cpuSeconds(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / 100; // utime, stime in clock ticks (USER_HZ 100)
  } catch {
    return 0;
  }
}

function childrenOf(pid: number): number[] {
  const out: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      if (Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === pid) out.push(Number(entry));
    } catch {
      // gone meanwhile
    }
  }
  return out;
}

/** Busy fraction of all cores between two /proc/stat readings. */
function machineTicks(): { busy: number; total: number } {
  const [, ...cols] = readFileSync('/proc/stat', 'utf8').split('\n')[0].split(/\s+/);
  const n = cols.filter(Boolean).map(Number);
  const idle = n[3] + n[4];
  const total = n.reduce((a, b) => a + b, 0);
  return { busy: total - idle, total };
}

interface Service {
  url: string;
  pid: number;
  stop(): Promise<void>;
}

async function startService(databaseUrl: string, gatewayUrl: string): Promise<Service> {
  const port = await stablePort();
  // Production settings: info access logs (to /dev/null here), default pool size and limits.
  const child: ChildProcess = spawn(process.execPath, ['--import', 'tsx', 'server/main.ts'], {
    cwd: ROOT,
    env: {
      PATH: process.env.PATH ?? '',
      HOME: process.env.HOME ?? '/tmp',
      NODE_ENV: 'production',
      ...SECRETS,
      DATABASE_URL: databaseUrl,
      PAYMENT_GATEWAY_URL: gatewayUrl,
      PORT: String(port),
      HOST: '127.0.0.1',
      LOG_LEVEL: 'info',
    },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const url = `http://127.0.0.1:${port}`;
  const service: Service = {
    url,
    pid: child.pid ?? -1,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      await exited;
    },
  };
  const deadline = Date.now() + 60000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`instance exited at start (${child.exitCode})`);
    try {
      if ((await fetch(`${url}/readyz`)).ok) return service;
    } catch {
      // not listening yet
    }
    await sleep(100);
  }
  await service.stop();
  throw new Error('instance did not become ready');
}

function orderRequests() {
  const tokens = Array.from({ length: USERS }, (_, i) => {
    const identity = { tenantId: `probe-${i % 10}`, userId: String(1000 + i), role: 'user' as const };
    return `Bearer ${signToken(SECRETS.JWT_SECRET, identity, 3600).token}`;
  });
  let n = 0;
  return [
    {
      method: 'POST',
      path: '/api/v1/orders',
      // Fresh key and merchantOrderNo per request: every request is a real insert, never a replay.
      setupRequest: (req: object) => {
        n += 1;
        return {
          ...req,
          headers: {
            'content-type': 'application/json',
            authorization: tokens[n % USERS],
            'idempotency-key': `probe-${randomBytes(12).toString('hex')}`,
          },
          body: JSON.stringify({ merchantOrderNo: `p-${randomBytes(8).toString('hex')}`, amount: '10.50' }),
        };
      },
    },
  ];
}

interface Point {
  name: string;
  instances: number;
  nginx: boolean;
  reqPerSec: number;
  p50: number;
  p99: number;
  ok: number;
  non2xx: number;
  errors: number;
  ordersInDb: number;
  pgConnMax: number;
  pgActiveMax: number;
  cpu: Record<string, number>;
}

async function measurePoint(
  name: string,
  databaseUrl: string,
  admin: pg.Client,
  dbName: string,
  gatewayUrl: string,
): Promise<Point> {
  const [count, mode] = name.split('-');
  const services: Service[] = [];
  let nginx: Nginx | undefined;
  try {
    for (let i = 0; i < Number(count); i++) services.push(await startService(databaseUrl, gatewayUrl));
    if (mode === 'nginx') nginx = await startNginx(services.map((s) => s.url.replace('http://', '')));
    const url = nginx?.url ?? services[0].url;
    const requests = orderRequests();
    await autocannon({ url, connections: CONNECTIONS, duration: WARMUP, requests });

    const probeDb = new pg.Client(databaseUrl);
    await probeDb.connect();
    const ordersBefore = Number((await probeDb.query('SELECT count(*)::int AS n FROM orders')).rows[0].n);

    const groups = () => {
      const nginxPids = nginx ? [nginx.pid, ...childrenOf(nginx.pid)] : [];
      return { services: services.map((s) => s.pid), nginx: nginxPids };
    };
    const backendPids = new Set<number>();
    let pgConnMax = 0;
    let pgActiveMax = 0;
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        const { rows } = await admin.query(
          `SELECT pid, state FROM pg_stat_activity WHERE datname = $1 AND application_name LIKE 'idempotent-service%'`,
          [dbName],
        );
        for (const r of rows) backendPids.add(Number(r.pid));
        pgConnMax = Math.max(pgConnMax, rows.length);
        pgActiveMax = Math.max(pgActiveMax, rows.filter((r) => r.state !== 'idle').length);
        await sleep(200);
      }
    })();
    // Backends of the warm-up are already connected: their counters are the baseline.
    const { rows: warm } = await admin.query(
      `SELECT pid FROM pg_stat_activity WHERE datname = $1 AND application_name LIKE 'idempotent-service%'`,
      [dbName],
    );
    const pgStart = new Map<number, number>(warm.map((r) => [Number(r.pid), cpuSeconds(Number(r.pid))]));
    const g0 = groups();
    const cpu0 = {
      instances: g0.services.reduce((a, p) => a + cpuSeconds(p), 0),
      nginx: g0.nginx.reduce((a, p) => a + cpuSeconds(p), 0),
      probe: process.cpuUsage(),
    };
    const m0 = machineTicks();

    const result = await autocannon({ url, connections: CONNECTIONS, duration: DURATION, requests });

    const m1 = machineTicks();
    const g1 = groups();
    const probeCpu = process.cpuUsage(cpu0.probe);
    sampling = false;
    await sampler;
    let pgCpu = 0;
    for (const pid of backendPids) pgCpu += cpuSeconds(pid) - (pgStart.get(pid) ?? 0);
    const elapsed = DURATION;
    const cpu = {
      'node instances': (g1.services.reduce((a, p) => a + cpuSeconds(p), 0) - cpu0.instances) / elapsed,
      nginx: (g1.nginx.reduce((a, p) => a + cpuSeconds(p), 0) - cpu0.nginx) / elapsed,
      'postgres backends': pgCpu / elapsed,
      'load generator': (probeCpu.user + probeCpu.system) / 1e6 / elapsed,
      'machine busy': ((m1.busy - m0.busy) / (m1.total - m0.total)) * os.cpus().length,
    };
    const ordersAfter = Number((await probeDb.query('SELECT count(*)::int AS n FROM orders')).rows[0].n);
    await probeDb.end();
    return {
      name,
      instances: services.length,
      nginx: Boolean(nginx),
      reqPerSec: result.requests.average,
      p50: result.latency.p50,
      p99: result.latency.p99,
      ok: result['2xx'],
      non2xx: result.non2xx,
      errors: result.errors + result.timeouts,
      ordersInDb: ordersAfter - ordersBefore,
      pgConnMax,
      pgActiveMax,
      cpu,
    };
  } finally {
    await nginx?.stop();
    await Promise.all(services.map((s) => s.stop()));
  }
}

async function main() {
  const points = String(args.points).split(',');
  for (const point of points) {
    if (!/^(1-direct|[1-9]\d*-nginx)$/.test(point))
      throw new Error(`bad point ${point}: 1-direct or <n>-nginx`);
  }
  if (points.some((p) => p.endsWith('-nginx')) && !findNginx()) throw new Error('nginx is not installed');
  let embedded: EmbeddedDatabase | undefined;
  let cluster: Cluster | undefined;
  let adminUrl = String(args['admin-url']);
  let dbName = `scale_probe_${randomBytes(4).toString('hex')}`;
  let databaseUrl: string;
  let admin: pg.Client;
  if (args.target === 'cluster') {
    console.error('== starting deploy/ha cluster (3 etcd, 3 PostgreSQL under Patroni, HAProxy, PgBouncer)');
    cluster = await startCluster({ base: 16440, log: (line) => console.error(line) });
    dbName = 'app';
    adminUrl = cluster.adminUrl;
    databaseUrl = cluster.databaseUrl;
    admin = new pg.Client(adminUrl);
    await admin.connect();
  } else {
    if (args.target !== 'single') throw new Error('--target: single or cluster');
    try {
      const probe = new pg.Client(adminUrl);
      await probe.connect();
      await probe.end();
    } catch {
      console.error(`${adminUrl} not reachable: using a throw-away embedded PostgreSQL`);
      embedded = await startEmbeddedPostgres({ port: await stablePort() });
      adminUrl = embedded.url;
    }
    admin = new pg.Client(adminUrl);
    await admin.connect();
    await admin.query(`CREATE DATABASE ${dbName}`);
    databaseUrl = Object.assign(new URL(adminUrl), { pathname: `/${dbName}` }).toString();
  }
  const gateway = await startGatewaySimulator({ host: '127.0.0.1', port: 0 });
  const maxConnections = (await admin.query('SHOW max_connections')).rows[0].max_connections;
  const serverVersion = (await admin.query('SHOW server_version')).rows[0].server_version;
  const results: Point[] = [];
  try {
    for (let round = 1; round <= Number(args.rounds); round++) {
      for (const point of points) {
        console.error(`== round ${round}, ${point}: ${WARMUP} s warm-up, ${DURATION} s measured`);
        results.push(await measurePoint(point, databaseUrl, admin, dbName, gateway.url));
      }
    }
  } finally {
    await gateway.close();
    if (!cluster) await admin.query(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`);
    await admin.end();
    await embedded?.stop();
    await cluster?.down();
  }

  const load = os.loadavg().map((l) => l.toFixed(2));
  console.log(
    `machine: ${os.cpus().length} x ${os.cpus()[0]?.model}, ${(os.totalmem() / 2 ** 30).toFixed(1)} GiB; ` +
      `PostgreSQL ${serverVersion}${embedded ? ' (embedded)' : ''}${cluster ? ' (deploy/ha cluster: 3 members, synchronous replication, via PgBouncer and HAProxy)' : ''}, max_connections ${maxConnections}; ` +
      `node ${process.version}; load average after the run ${load.join(' ')}`,
  );
  console.log(
    `load: autocannon, ${CONNECTIONS} connections, ${DURATION} s per point after ${WARMUP} s warm-up; ` +
      `POST /api/v1/orders, fresh Idempotency-Key and merchantOrderNo per request, ${USERS} users`,
  );
  console.log('');
  console.log(
    '| point | req/s | p50 ms | p99 ms | 2xx | non-2xx | errors | orders in db | pg conns max (busy) | CPU cores: node / nginx / pg backends / load gen / rest of machine |',
  );
  console.log('|---|---|---|---|---|---|---|---|---|---|');
  const row = (name: string, r: Omit<Point, 'name'>) => {
    const c = r.cpu;
    const ours = c['node instances'] + c.nginx + c['postgres backends'] + c['load generator'];
    const cores = [
      c['node instances'],
      c.nginx,
      c['postgres backends'],
      c['load generator'],
      c['machine busy'] - ours,
    ]
      .map((v) => v.toFixed(2))
      .join(' / ');
    console.log(
      `| ${name} | ${r.reqPerSec.toFixed(0)} | ${r.p50} | ${r.p99} | ${r.ok} | ${r.non2xx} | ${r.errors} | ` +
        `${r.ordersInDb} | ${r.pgConnMax} (${r.pgActiveMax}) | ${cores} |`,
    );
  };
  for (const r of results) row(r.name, r);
  if (Number(args.rounds) > 1) {
    console.log('');
    console.log('Median per point (by req/s):');
    console.log('');
    console.log('| point | req/s | p50 ms | p99 ms | pg conns max (busy) |');
    console.log('|---|---|---|---|---|');
    for (const point of points) {
      const runs = results.filter((r) => r.name === point).sort((a, b) => a.reqPerSec - b.reqPerSec);
      const m = runs[Math.floor(runs.length / 2)];
      const all = runs.map((r) => r.reqPerSec.toFixed(0)).join(', ');
      console.log(
        `| ${point} | ${m.reqPerSec.toFixed(0)} (runs: ${all}) | ${m.p50} | ${m.p99} | ${m.pgConnMax} (${m.pgActiveMax}) |`,
      );
    }
  }
}

main().catch((err) => {
  console.error(err);
  process.exitCode = 1;
});

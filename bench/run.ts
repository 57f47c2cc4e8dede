/**
 * `npm run bench` (about 15 min) / `npm run bench -- --quick` (about 2 min). See docs/BENCHMARKS.md.
 *
 * Starts a PostgreSQL (embedded, or a scratch database on DATABASE_URL, dropped at the end), ONE
 * service process (what `npm start` runs, pointed at the gateway simulator's own process: the built dist/server/main.js with the start script's
 * heap flags, bench/start-command.ts; plus bench/probe.ts compiled next to it, a preload that
 * counts queries or records a CPU profile only when asked), the hand-written peer (bench/peer.ts), a bare Express 5 process (HTTP ceiling), and
 * drives them from this process with autocannon and pgbench, on loopback, bounded in count and
 * time. Everything is reported as ratios within one run: one table on stdout, the details in
 * bench/results/<timestamp>.json.
 *
 * The runner: options (bench/settings.ts), one BenchRun holding the run's state (bench/bench-run.ts),
 * one file per scenario (bench/scenarios/), the report (bench/report-file.ts).
 *
 * Options: --quick; --only=<scenario,...> (plain always runs: it is the baseline); --profile (CPU
 * profile of the service per scenario, under bench/results/profiles/); --rounds=N --segment=S
 * --connections=N; what-if experiments, never the default: --server-env=NAME=VALUE (repeatable),
 * --purge-busy-percent=N.
 */

import { mkdir } from 'node:fs/promises';
import os from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { stablePort } from '../test/support/stable-port.js';
import { BenchRun } from './bench-run.js';
import { load } from './load.js';
import { serverMemory, tableStats } from './measure.js';
import { provePeer } from './peer-check.js';
import { killQuietly, openBenchDatabase } from './postgres.js';
import { memoryOf, sampleMemory, startNode } from './processes.js';
import { report } from './report-file.js';
import { exportScenario, refundsScenario } from './scenarios/effects.js';
import { eventsScenario } from './scenarios/events.js';
import { growthScenario } from './scenarios/growth.js';
import { keyedPathsScenario } from './scenarios/keyed-paths.js';
import { outboxScenario } from './scenarios/outbox.js';
import { eventsPurgeScenario, purgeScenario } from './scenarios/purge.js';
import { roundTrips } from './scenarios/round-trips.js';
import { stormScenario } from './scenarios/storm.js';
import { throughputScenarios } from './scenarios/throughput.js';
import { parseOptions, SECRETS, TENANT, USAGE, WAIT_MS } from './settings.js';
import { buildForBench, serviceEnv, startCommand } from './start-command.js';

async function main(run: BenchRun): Promise<void> {
  const {
    QUICK,
    PROFILE,
    PURGE_BUSY_PERCENT,
    DB_TCP,
    SERVER_ENV,
    CONNECTIONS,
    ROUNDS,
    SEGMENT,
    P,
    PROFILE_DIR,
    log,
    results,
    rows,
    enabled,
    plainUser,
    idemUser,
  } = run;
  log(
    `mode ${QUICK ? 'quick' : 'full'}; ${CONNECTIONS} connections; throughput scenarios ${ROUNDS} × ${SEGMENT}s`,
  );
  if (Object.keys(SERVER_ENV).length > 0 || PROFILE || PURGE_BUSY_PERCENT !== undefined || DB_TCP) {
    log(
      `experiment: ${JSON.stringify({ serverEnv: SERVER_ENV, purgeBusyPercent: PURGE_BUSY_PERCENT, profile: PROFILE, dbTcp: DB_TCP })} (not the default run)`,
    );
  }
  results.loadAverageAtStart = os.loadavg();
  if (os.loadavg()[0] > os.cpus().length) {
    log(
      `warning: load average ${os.loadavg()[0].toFixed(1)} on ${os.cpus().length} CPUs: other work shares this machine, numbers will be noisy`,
    );
  }
  const db = await openBenchDatabase(log, { tcp: DB_TCP });
  run.onCleanup(() => db.stop());
  run.postmasterPid = db.pid;
  if (db.pid) run.pids.add(db.pid);
  log(
    `PostgreSQL ${db.version} (${db.origin}, ${db.transport}); pg_stat_statements ${db.statements ? 'on' : 'off'}`,
  );

  const [serverPort, barePort, peerPort, peerTokenPort, gatewayPort] = await Promise.all([
    stablePort(),
    stablePort(),
    stablePort(),
    stablePort(),
    stablePort(),
  ]);
  // The payment gateway simulator as a process of its own (`npm run gateway`), as a deployment has its
  // gateway elsewhere: its ledger (every charge and refund of the run, in memory) and its CPU are not
  // counted as the service's.
  const gateway = await startNode({
    name: 'gateway',
    args: ['--import', 'tsx', 'server/gateway-cli.ts'],
    env: { GATEWAY_PORT: String(gatewayPort) },
    port: gatewayPort,
    readyPath: '/ledger',
  });
  run.pids.add(gateway.pid);
  run.gatewayPid = gateway.pid;
  run.onCleanup(() => gateway.stop());
  log(`gateway simulator pid ${gateway.pid} at ${gateway.url}`);
  if (PROFILE) await mkdir(PROFILE_DIR, { recursive: true });
  // The process `npm start` runs (built JS, its heap flags), with the probe preloaded.
  const start = startCommand();
  const probe = buildForBench();
  log(`service: node ${start.flags.join(' ')} ${start.entry} (as npm start), probe ${probe}`);
  // The service as `npm start` runs it; a scenario may start more instances of it (keyed-paths).
  const launchService = (name: string, port: number) =>
    startNode({
      name,
      args: [...start.flags, '--import', probe, start.entry],
      env: {
        ...serviceEnv({ databaseUrl: db.url, gatewayUrl: gateway.url, port }),
        // The slow-write storm sets a failpoint over PUT /__failpoints for its own duration only.
        FAILPOINTS_CONTROL: '1',
        ...SERVER_ENV,
      },
      port,
      readyPath: '/readyz',
      ipc: true,
    });
  run.launchService = async (name) => {
    const child = await launchService(name, await stablePort());
    run.pids.add(child.pid);
    run.onCleanup(() => child.stop());
    return child;
  };
  const serverStart = launchService('service', serverPort);
  const bareStart = enabled('bare')
    ? startNode({
        name: 'bare-express',
        args: ['--import', 'tsx', 'bench/bare-express.ts', String(barePort)],
        env: { NODE_ENV: 'production' },
        port: barePort,
        readyPath: '/healthz',
      })
    : undefined;
  // The hand-written peer: same database (its own schema), same pool size, secrets and wait bound;
  // the one checking the caller's row (as the contract and the service do) is the one compared.
  const startPeer = (name: string, port: number, check: 'row' | 'token', schema: string) =>
    startNode({
      name,
      args: ['--import', 'tsx', 'bench/peer.ts', String(port)],
      env: {
        NODE_ENV: 'production',
        DATABASE_URL: db.url,
        DB_POOL_MAX: SERVER_ENV.DB_POOL_MAX ?? '10',
        JWT_SECRET: SECRETS.JWT_SECRET,
        RESPONSE_ENCRYPTION_KEY: SECRETS.RESPONSE_ENCRYPTION_KEY,
        IDEMPOTENCY_WAIT_MS: String(WAIT_MS),
        PEER_USER_CHECK: check,
        PEER_SCHEMA: schema,
      },
      port,
      readyPath: '/healthz',
    });
  const peerStart = enabled('peer') ? startPeer('peer', peerPort, 'row', 'peer') : undefined;
  const peerTokenStart = enabled('peer-token')
    ? startPeer('peer-token', peerTokenPort, 'token', 'peer_token')
    : undefined;
  const [serverSettled, bareSettled, peerSettled, peerTokenSettled] = await Promise.allSettled([
    serverStart,
    bareStart,
    peerStart,
    peerTokenStart,
  ]);
  for (const s of [serverSettled, bareSettled, peerSettled, peerTokenSettled]) {
    if (s.status === 'fulfilled' && s.value) {
      const child = s.value;
      run.pids.add(child.pid);
      run.onCleanup(() => child.stop());
    }
  }
  if (serverSettled.status === 'rejected') throw serverSettled.reason;
  if (bareSettled.status === 'rejected') throw bareSettled.reason;
  if (peerSettled.status === 'rejected') throw peerSettled.reason;
  if (peerTokenSettled.status === 'rejected') throw peerTokenSettled.reason;
  const server = serverSettled.value;
  run.serverChild = server;
  const bare = bareSettled.value;
  log(`service pid ${server.pid} at ${server.url}${bare ? `; bare Express pid ${bare.pid}` : ''}`);
  const memory = sampleMemory(server.pid);
  run.onCleanup(async () => memory.stop());

  const sql = new pg.Pool({ connectionString: db.url, max: 4 });
  // pool.end() does not wait for its clients' sockets to close: when PostgreSQL stops right after,
  // an idle client sees "terminating connection" and the pool re-emits it. Nothing to do about it.
  sql.on('error', () => {});
  run.onCleanup(() => sql.end());
  run.db = db;
  run.sql = sql;
  run.server = server;
  run.bare = bare;
  run.peer = peerSettled.value;
  run.peerToken = peerTokenSettled.value;
  // Proven correct before they are measured (a fast wrong peer would prove nothing).
  if (run.peer) {
    const tokenFor = (id: string, role: 'admin' | 'user') => run.token(Number(id), role);
    results.peerProof = await provePeer(run.peer.url, run.admins[0], sql, {
      schema: 'peer',
      rowCheck: { tenant: TENANT, tokenFor },
    });
    log(`peer pid ${run.peer.pid} at ${run.peer.url}: proven (${JSON.stringify(results.peerProof)})`);
  }
  if (run.peerToken) {
    results.peerTokenProof = await provePeer(run.peerToken.url, run.admins[0], sql, { schema: 'peer_token' });
    log(`token-only peer pid ${run.peerToken.pid} at ${run.peerToken.url}: proven (no row check)`);
  }

  results.memoryAfterStart = await serverMemory(server, true);
  // Warm-up (JIT, pools, caches): not reported.
  log('warm-up');
  await load({ url: server.url, connections: CONNECTIONS, duration: P.warmup, next: plainUser });
  await load({ url: server.url, connections: CONNECTIONS, duration: P.warmup, next: idemUser });
  if (bare) await load({ url: bare.url, connections: CONNECTIONS, duration: 1, next: plainUser });
  for (const peer of [run.peer, run.peerToken]) {
    if (!peer) continue;
    await load({ url: peer.url, connections: CONNECTIONS, duration: P.warmup, next: plainUser });
    await load({ url: peer.url, connections: CONNECTIONS, duration: P.warmup, next: idemUser });
  }

  const captures = enabled('roundtrips') || enabled('pgbench') ? await roundTrips(run) : undefined;
  // Peak RSS so far after each phase (VmHWM only grows): shows which phase set the peak.
  const timeline: Array<{ after: string; hwmMb?: number; rssMb?: number }> = [];
  results.memoryTimeline = timeline;
  results.memoryBySegment = run.segmentMemory;
  const mark = (after: string) => {
    const m = memoryOf(server.pid);
    timeline.push({ after, hwmMb: m?.hwmMb, rssMb: m?.rssMb });
  };
  mark('warm-up and round trips');
  await throughputScenarios(run, enabled('pgbench') ? captures : undefined);
  mark('throughput');
  results.tableStatsAfterThroughput = await tableStats(sql);
  // Effects and events (issues 27 and 28): each an interleaved comparison or a latency of its own.
  if (enabled('keyed-paths')) await keyedPathsScenario(run);
  if (enabled('refunds')) await refundsScenario(run);
  if (enabled('outbox')) await outboxScenario(run);
  if (enabled('events')) await eventsScenario(run);
  mark('refunds, outbox, events');
  if (enabled('export')) await exportScenario(run);
  mark('export');
  if (enabled('storm')) {
    await stormScenario(run);
    await stormScenario(run, 200);
  }
  mark('storm');
  results.memoryBeforeGrowth = await serverMemory(server, false);
  if (enabled('growth')) await growthScenario(run);
  mark('growth');
  if (enabled('purge')) {
    await purgeScenario(run);
    await eventsPurgeScenario(run);
  }
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
    target: '≤ 200 MB',
    pass: peakMb <= 200,
  });

  await server.stop();
  await report(run);
}

const options = parseOptions(process.argv.slice(2));
if ('problem' in options) {
  console.error(`${options.problem}\n${USAGE}`);
  process.exit(2);
}
const run = new BenchRun(options);
// Last resort: whatever is still running when this process exits is killed by pid.
process.on('exit', () => {
  for (const pid of run.pids) killQuietly(pid);
});
// An error nobody awaited (e.g. an 'error' event) must not skip the cleanup either.
for (const event of ['uncaughtException', 'unhandledRejection'] as const) {
  process.on(event, (err: unknown) => {
    run.log(`${event}: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
    run.cleanup().finally(() => process.exit(1));
  });
}
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    run.log(`${signal}: stopping`);
    run.cleanup().finally(() => process.exit(130));
  });
}

try {
  await main(run);
} catch (err) {
  run.log(`failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
  process.exitCode = 1;
} finally {
  await run.cleanup();
}
// Nothing of ours may keep running: children were stopped above; pids are SIGKILLed on exit.
await sleep(10);
process.exit(process.exitCode ?? 0);

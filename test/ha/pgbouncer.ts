/**
 * A real PgBouncer for a test: its own temporary folder and configuration, transaction pool mode, on
 * a free loopback port, in front of a PostgreSQL server given by host and port. Started in a process
 * group of its own and stopped by that group (never by name). As root it runs as `postgres` (it
 * refuses root), as deploy/ha does.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { accessSync, constants } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { asPostgres, ownedByPostgres, REQUIRED_PROGRAMS } from '../../deploy/ha/cluster.js';
import { stablePort } from '../support/stable-port.js';

export const PGBOUNCER = REQUIRED_PROGRAMS.pgbouncer;

export function pgbouncerInstalled(): boolean {
  try {
    accessSync(PGBOUNCER, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

export interface PgBouncerOptions {
  /** The PostgreSQL server behind it (TCP). */
  server: { host: string; port: number };
  /** Client-visible database names: the server's database each maps to, and its server connections. */
  databases: Record<string, { dbname: string; poolSize: number }>;
  /** The roles PgBouncer logs in as (the client's own name), with the password the server wants. */
  users: Array<{ name: string; password: string }>;
  /** A role allowed on the admin console (database `pgbouncer`: SHOW POOLS, SHOW SERVERS, ...). */
  adminUser: string;
  /** query_wait_timeout: how long a client may wait for a server connection before an error. */
  queryWaitTimeoutMs: number;
}

export interface PgBouncer {
  port: number;
  dir: string;
  /** postgres://user@127.0.0.1:port/database (client side is trust: PgBouncer logs in for the client). */
  url(database: string, user: string): string;
  /** One statement on the admin console, rows as objects. */
  admin(command: string): Promise<Array<Record<string, unknown>>>;
  /** PgBouncer's own log. */
  log(): Promise<string>;
  stop(): Promise<void>;
}

const q = (s: string) => `"${s.replace(/"/g, '""')}"`;

export async function startPgBouncer(opts: PgBouncerOptions): Promise<PgBouncer> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'idem-pgbouncer-'));
  const port = await stablePort();
  const authFile = path.join(dir, 'users.txt');
  const logFile = path.join(dir, 'pgbouncer.log');
  await writeFile(authFile, `${opts.users.map((u) => `${q(u.name)} ${q(u.password)}`).join('\n')}\n`);
  const ini = [
    '[databases]',
    ...Object.entries(opts.databases).map(
      ([alias, d]) =>
        `${alias} = host=${opts.server.host} port=${opts.server.port} dbname=${d.dbname} pool_size=${d.poolSize}`,
    ),
    '',
    '[pgbouncer]',
    'listen_addr = 127.0.0.1',
    `listen_port = ${port}`,
    'unix_socket_dir =',
    'auth_type = trust',
    `auth_file = ${authFile}`,
    `admin_users = ${opts.adminUser}`,
    'pool_mode = transaction',
    'max_client_conn = 500',
    // As deploy/ha/pgbouncer.ini: the wait bounds the service sends as startup parameters are dropped
    // (PgBouncer refuses a client that sends them otherwise); the role must carry them.
    'ignore_startup_parameters = extra_float_digits,lock_timeout,statement_timeout,idle_in_transaction_session_timeout',
    `query_wait_timeout = ${(opts.queryWaitTimeoutMs / 1000).toFixed(3)}`,
    'server_login_retry = 1',
    'server_tls_sslmode = disable',
    `logfile = ${logFile}`,
    `pidfile = ${path.join(dir, 'pgbouncer.pid')}`,
    '',
  ].join('\n');
  const iniFile = path.join(dir, 'pgbouncer.ini');
  await writeFile(iniFile, ini);
  for (const f of [dir, authFile, iniFile]) await ownedByPostgres(f);
  const [command, args] = asPostgres(PGBOUNCER, [iniFile]);
  const child: ChildProcess = spawn(command, args, { detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout?.on('data', (d: Buffer) => {
    out += d.toString();
  });
  child.stderr?.on('data', (d: Buffer) => {
    out += d.toString();
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const pid = child.pid;
  if (pid === undefined) throw new Error(`could not start ${PGBOUNCER}`);

  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      try {
        process.kill(-pid, 'SIGTERM');
      } catch {
        // gone
      }
      const killer = setTimeout(() => {
        try {
          process.kill(-pid, 'SIGKILL');
        } catch {
          // gone
        }
      }, 3000);
      await exited;
      clearTimeout(killer);
    }
    await rm(dir, { recursive: true, force: true });
  };

  const bouncer: PgBouncer = {
    port,
    dir,
    url: (database, user) => `postgres://${encodeURIComponent(user)}@127.0.0.1:${port}/${database}`,
    async admin(command) {
      const client = new pg.Client({ connectionString: bouncer.url('pgbouncer', opts.adminUser) });
      await client.connect();
      try {
        return (await client.query(command)).rows as Array<Record<string, unknown>>;
      } finally {
        await client.end();
      }
    },
    log: () => readFile(logFile, 'utf8').catch(() => ''),
    stop,
  };
  const deadline = Date.now() + 15000;
  for (;;) {
    if (child.exitCode !== null) {
      await stop();
      throw new Error(`pgbouncer exited at start (${child.exitCode}): ${out}`);
    }
    try {
      await bouncer.admin('SHOW VERSION');
      return bouncer;
    } catch (err) {
      if (Date.now() > deadline) {
        await stop();
        throw new Error(`pgbouncer did not answer on ${port}: ${String(err)} ${out}`);
      }
      await sleep(100);
    }
  }
}

import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { type Options, QueryTypes, Sequelize, type Transaction } from 'sequelize';
import type { Config } from './config.js';
import { isDatabaseUnavailable } from './db-errors.js';
import type { EmbeddedDatabase } from './embedded-postgres.js';

export interface Database {
  sequelize: Sequelize;
  url: string;
  close(): Promise<void>;
}

/** The application_name of this process's connections. */
export const applicationName = () => `idempotent-service:${process.pid}`;

/** How long anything may wait in the database (CONTRACT section 5, "Waits are bounded"). */
export interface WaitBounds {
  /** IDEMPOTENCY_WAIT_MS: a lock wait or a wait for a pooled connection ends after this. */
  waitMs: number;
  /** IDEMPOTENCY_LEASE_MS: a transaction left idle this long (its instance froze) is ended by the server. */
  leaseMs: number;
}

const DEFAULT_BOUNDS: WaitBounds = { waitMs: 1000, leaseMs: 30000 };

/** The session settings that bound every wait, in milliseconds, from the configured bounds. */
export function sessionBounds(bounds: WaitBounds = DEFAULT_BOUNDS) {
  return {
    lock_timeout: Math.max(1, bounds.waitMs),
    statement_timeout: Math.max(30000, bounds.leaseMs),
    idle_in_transaction_session_timeout: Math.max(1000, bounds.leaseMs),
  };
}

/**
 * The pool, with every wait bounded on every connection, whatever runs on it:
 * - `lock_timeout` = the wait bound: a row or unique-index lock held by another transaction (a
 *   duplicate in flight, or a stalled instance anywhere) ends the wait with 55P03, answered 202 or
 *   503 by the caller, never a hang (statements that must wait longer say so with SET LOCAL);
 * - pool `acquire` = the wait bound: a busy pool answers 503 instead of queueing the request;
 * - `idle_in_transaction_session_timeout` = the lease: a transaction left open by a frozen or
 *   partitioned instance is ended by the server, so its locks do not outlive its lease;
 * - `statement_timeout`: a runaway statement is cancelled (30 s, or the lease when longer);
 * - TCP keepalive: a peer that vanished without a reset is noticed.
 * They travel as startup parameters. A pooler in transaction mode (PgBouncer) cannot keep those per
 * client: it drops them, the role carries them instead, and checkSessionBounds() proves it at start.
 * No other session state is set: Sequelize's per-connection SETs (time zone, client_min_messages)
 * are turned off, so a server connection shared by a pooler carries nothing from one client to the next.
 */
export function createSequelize(
  url: string,
  poolMax: number,
  bounds: WaitBounds = DEFAULT_BOUNDS,
): Sequelize {
  const session = sessionBounds(bounds);
  // keepDefaultTimezone is read by Sequelize's postgres dialect but missing from its Options type.
  const options: Options & { keepDefaultTimezone: boolean } = {
    dialect: 'postgres',
    logging: false,
    // Dates are sent with their offset and read back as instants: the session's time zone is not needed.
    keepDefaultTimezone: true,
    pool: { max: poolMax, min: 0, idle: 10000, acquire: Math.max(100, session.lock_timeout) },
    dialectOptions: {
      // With the pid: an operator (or the `drop` failpoint) can tell one instance's connections apart.
      application_name: applicationName(),
      clientMinMessages: 'ignore',
      ...session,
      keepAlive: true,
    },
  };
  return new Sequelize(url, options);
}

/**
 * Refuses to run with looser wait bounds than configured: reads the settings a session really has
 * (through a pooler, the role's; directly, the startup parameters) and names each one that is off.
 */
export async function checkSessionBounds(sequelize: Sequelize, bounds: WaitBounds): Promise<void> {
  const want = sessionBounds(bounds);
  const rows = await sequelize.query<{ name: keyof typeof want; ms: string }>(
    `SELECT name, setting AS ms FROM pg_settings WHERE name IN ('lock_timeout', 'statement_timeout', 'idle_in_transaction_session_timeout')`,
    { type: QueryTypes.SELECT },
  );
  const loose = rows.filter((r) => Number(r.ms) === 0 || Number(r.ms) > want[r.name]);
  if (loose.length === 0) return;
  const role = (
    await sequelize.query<{ r: string }>('SELECT current_user AS r', { type: QueryTypes.SELECT })
  )[0]?.r;
  throw new Error(
    `the database sessions do not have the configured wait bounds: ${loose
      .map((r) => `${r.name} is ${r.ms === '0' ? 'off' : `${r.ms} ms`} (want ${want[r.name]} ms)`)
      .join(', ')}. A pooler in transaction mode drops them from the connection; set them on the role: ${loose
      .map((r) => `ALTER ROLE "${role}" SET ${r.name} = '${want[r.name]}ms';`)
      .join(' ')}`,
  );
}

/**
 * Runs `work` once the database takes writes, retrying while it is unreachable or read-only (a
 * failover in progress: no leader yet, or a replica behind the router), for at most `timeoutMs`.
 * Start-up uses it for the migrations; `onWait` hears the first reason it waits.
 */
export async function whenWritable<T>(
  sequelize: Sequelize,
  timeoutMs: number,
  work: () => Promise<T>,
  onWait: (why: string) => void = () => {},
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (let attempt = 0; ; attempt++) {
    let why: string;
    try {
      const [row] = await sequelize.query<{ recovering: boolean }>(
        'SELECT pg_is_in_recovery() AS recovering',
        {
          type: QueryTypes.SELECT,
        },
      );
      if (!row?.recovering) return await work();
      why = 'the database is a read-only replica (no writable leader yet)';
    } catch (err) {
      if (!isDatabaseUnavailable(err)) throw err;
      why = `the database is unavailable (${err instanceof Error ? err.message : String(err)})`;
    }
    if (Date.now() >= deadline) throw new Error(`no writable database within ${timeoutMs} ms: ${why}`);
    if (attempt === 0) onWait(why);
    await sleep(Math.min(1000, 50 * 2 ** attempt));
  }
}

/**
 * Connects to DATABASE_URL, or starts the embedded PostgreSQL kept under DATA_DIR (npm start).
 * Returns the embedded handle so that shutdown can stop it after the pool is closed.
 */
export async function openDatabase(config: Config, log: (line: string) => void): Promise<Database> {
  let embedded: EmbeddedDatabase | undefined;
  let url = config.DATABASE_URL;
  if (!url) {
    // Loaded only when needed: the package registers process exit hooks on import.
    const { startEmbeddedPostgres } = await import('./embedded-postgres.js');
    embedded = await startEmbeddedPostgres({
      dir: path.join(config.DATA_DIR, 'pg'),
      port: config.EMBEDDED_PG_PORT,
      log,
    });
    url = embedded.url;
  }
  const sequelize = createSequelize(url, config.DB_POOL_MAX, {
    waitMs: config.IDEMPOTENCY_WAIT_MS,
    leaseMs: config.IDEMPOTENCY_LEASE_MS,
  });
  return {
    sequelize,
    url,
    async close() {
      await sequelize.close();
      await embedded?.stop();
    },
  };
}

/** How a unit of work ends its transaction: keep what it wrote, or undo it (both return a value). */
export type Ending<T> = { commit: T } | { rollback: T };

/**
 * Runs `work` in a transaction that it ends by its result (Sequelize's managed transactions only end
 * by returning or throwing, and some steps must return a value after undoing their writes). A thrown
 * error rolls back. A failed COMMIT is not rolled back again: the connection went with it.
 */
export async function inTransaction<T>(
  sequelize: Sequelize,
  work: (t: Transaction) => Promise<Ending<T>>,
): Promise<T> {
  const t = await sequelize.transaction();
  let ending: Ending<T>;
  try {
    ending = await work(t);
  } catch (err) {
    await t.rollback().catch(() => {});
    throw err;
  }
  if ('rollback' in ending) {
    await t.rollback();
    return ending.rollback;
  }
  await t.commit();
  return ending.commit;
}

import path from 'node:path';
import { Sequelize, type Transaction } from 'sequelize';
import type { Config } from './config.js';
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
 */
export function createSequelize(
  url: string,
  poolMax: number,
  bounds: WaitBounds = DEFAULT_BOUNDS,
): Sequelize {
  const waitMs = Math.max(1, bounds.waitMs);
  return new Sequelize(url, {
    dialect: 'postgres',
    logging: false,
    pool: { max: poolMax, min: 0, idle: 10000, acquire: Math.max(100, waitMs) },
    dialectOptions: {
      // With the pid: an operator (or the `drop` failpoint) can tell one instance's connections apart.
      application_name: applicationName(),
      lock_timeout: waitMs,
      statement_timeout: Math.max(30000, bounds.leaseMs),
      idle_in_transaction_session_timeout: Math.max(1000, bounds.leaseMs),
      keepAlive: true,
    },
  });
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

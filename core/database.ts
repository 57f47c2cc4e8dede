import path from 'node:path';
import { Sequelize, type Transaction } from 'sequelize';
import type { Config } from './config.js';
import type { EmbeddedDatabase } from './embedded-postgres.js';

export interface Database {
  sequelize: Sequelize;
  url: string;
  close(): Promise<void>;
}

export function createSequelize(url: string, poolMax: number): Sequelize {
  return new Sequelize(url, {
    dialect: 'postgres',
    logging: false,
    pool: { max: poolMax, min: 0, idle: 10000, acquire: 30000 },
    // bigint ids stay decimal strings: a JS number would round ids above 2^53.
    dialectOptions: { application_name: 'idempotent-service' },
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
  const sequelize = createSequelize(url, config.DB_POOL_MAX);
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

import path from 'node:path';
import { Sequelize } from 'sequelize';
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

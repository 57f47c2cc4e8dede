import { readdir } from 'node:fs/promises';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { QueryTypes, Sequelize, type Transaction } from 'sequelize';
import { failpoint } from '../core/failpoints.js';

const require = createRequire(import.meta.url);
export const MIGRATIONS_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), 'migrations');
// Any constant works; it only has to be the same in every instance of this service.
const MIGRATION_LOCK_ID = 727_001;

export interface Migration {
  up(queryInterface: unknown, S: typeof Sequelize): Promise<unknown>;
  down?(queryInterface: unknown, S: typeof Sequelize): Promise<unknown>;
}

export async function migrationNames(): Promise<string[]> {
  return (await readdir(MIGRATIONS_DIR)).filter((f) => f.endsWith('.cjs')).sort();
}

export function loadMigration(name: string): Migration {
  return require(path.join(MIGRATIONS_DIR, name)) as Migration;
}

/**
 * The queryInterface a migration's up()/down() sees here: sequelize-cli's format, with every
 * `queryInterface.sequelize.query` sent in `transaction`. Without it the migration's SQL ran on
 * another pooled connection and committed on its own, so a crash between it and the SequelizeMeta
 * INSERT left it applied but unrecorded (and a non-idempotent one then failed every start-up).
 * Migrations use only `sequelize.query` (raw SQL); any other queryInterface method would run outside
 * the transaction, so it is refused rather than silently unbound.
 */
export function boundQueryInterface(sequelize: Sequelize, transaction: Transaction): unknown {
  const query = (sql: string, options: Record<string, unknown> = {}) =>
    sequelize.query(sql, { ...options, transaction });
  const bound = new Proxy(sequelize, {
    get: (target, prop, receiver) => (prop === 'query' ? query : Reflect.get(target, prop, receiver)),
  });
  return new Proxy(sequelize.getQueryInterface(), {
    get(target, prop, receiver) {
      if (prop === 'sequelize') return bound;
      const value = Reflect.get(target, prop, receiver);
      if (typeof value !== 'function') return value;
      return () => {
        throw new Error(`migrations here may use queryInterface.sequelize.query only (not ${String(prop)})`);
      };
    },
  });
}

async function lockAndReadApplied(sequelize: Sequelize, transaction: Transaction): Promise<Set<string>> {
  // Instances starting together wait here for the first one's migration: not a request's wait.
  await sequelize.query('SET LOCAL lock_timeout = 0', { transaction });
  await sequelize.query('SELECT pg_advisory_xact_lock(:id)', {
    replacements: { id: MIGRATION_LOCK_ID },
    transaction,
  });
  await sequelize.query('CREATE TABLE IF NOT EXISTS "SequelizeMeta" (name VARCHAR(255) PRIMARY KEY)', {
    transaction,
  });
  const rows = await sequelize.query<{ name: string }>('SELECT name FROM "SequelizeMeta"', {
    type: QueryTypes.SELECT,
    transaction,
  });
  return new Set(rows.map((r) => r.name));
}

/**
 * Applies pending migrations (sequelize-cli's files and its SequelizeMeta table, so both tools agree).
 * Each migration and its SequelizeMeta row are one transaction: a crash anywhere leaves the migration
 * wholly applied and recorded, or not at all. Each transaction takes the advisory lock and reads
 * SequelizeMeta again under it, so a second instance starting at once waits, then finds it done.
 */
export async function migrate(sequelize: Sequelize): Promise<string[]> {
  const applied: string[] = [];
  // A record is never removed while instances run, so what is recorded now needs no locked look.
  const recorded = await recordedNames(sequelize);
  for (const name of (await migrationNames()).filter((n) => !recorded.has(n))) {
    const ran = await sequelize.transaction(async (transaction) => {
      if ((await lockAndReadApplied(sequelize, transaction)).has(name)) return false;
      await loadMigration(name).up(boundQueryInterface(sequelize, transaction), Sequelize);
      // The moment a crash used to leave a migration applied but unrecorded (test/ops/migrate-crash.test.ts).
      await failpoint('migrate.after-up');
      await sequelize.query('INSERT INTO "SequelizeMeta" (name) VALUES (:name)', {
        replacements: { name },
        transaction,
      });
      return true;
    });
    if (ran) applied.push(name);
  }
  return applied;
}

async function recordedNames(sequelize: Sequelize): Promise<Set<string>> {
  const [{ present }] = await sequelize.query<{ present: boolean }>(
    `SELECT to_regclass('"SequelizeMeta"') IS NOT NULL AS present`,
    { type: QueryTypes.SELECT },
  );
  if (!present) return new Set();
  const rows = await sequelize.query<{ name: string }>('SELECT name FROM "SequelizeMeta"', {
    type: QueryTypes.SELECT,
  });
  return new Set(rows.map((r) => r.name));
}

/** For /readyz: every migration file is recorded as applied. */
export async function migrationsApplied(sequelize: Sequelize): Promise<boolean> {
  const done = await recordedNames(sequelize);
  return (await migrationNames()).every((n) => done.has(n));
}

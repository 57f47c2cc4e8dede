import { readdir } from 'node:fs/promises';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { QueryTypes, Sequelize } from 'sequelize';

const require = createRequire(import.meta.url);
export const MIGRATIONS_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), 'migrations');
// Any constant works; it only has to be the same in every instance of this service.
const MIGRATION_LOCK_ID = 727_001;

interface Migration {
  up(queryInterface: unknown, S: typeof Sequelize): Promise<unknown>;
}

export async function migrationNames(): Promise<string[]> {
  return (await readdir(MIGRATIONS_DIR)).filter((f) => f.endsWith('.cjs')).sort();
}

/**
 * Applies pending migrations (sequelize-cli's files and its SequelizeMeta table, so both tools agree).
 * Two instances starting at once: the advisory lock makes the second wait, then find nothing to do.
 */
export async function migrate(sequelize: Sequelize): Promise<string[]> {
  const applied: string[] = [];
  await sequelize.transaction(async (transaction) => {
    // Instances starting together wait here for the first one's migrations: not a request's wait.
    await sequelize.query('SET LOCAL lock_timeout = 0', { transaction });
    await sequelize.query('SELECT pg_advisory_xact_lock(:id)', {
      replacements: { id: MIGRATION_LOCK_ID },
      transaction,
    });
    await sequelize.query('CREATE TABLE IF NOT EXISTS "SequelizeMeta" (name VARCHAR(255) PRIMARY KEY)', {
      transaction,
    });
    const done = new Set(
      (
        await sequelize.query<{ name: string }>('SELECT name FROM "SequelizeMeta"', {
          type: QueryTypes.SELECT,
          transaction,
        })
      ).map((r) => r.name),
    );
    for (const name of await migrationNames()) {
      if (done.has(name)) continue;
      const migration = require(path.join(MIGRATIONS_DIR, name)) as Migration;
      // Each migration file is one multi-statement SQL string: PostgreSQL runs it atomically.
      await migration.up(sequelize.getQueryInterface(), Sequelize);
      await sequelize.query('INSERT INTO "SequelizeMeta" (name) VALUES (:name)', {
        replacements: { name },
        transaction,
      });
      applied.push(name);
    }
  });
  return applied;
}

/** For /readyz: every migration file is recorded as applied. */
export async function migrationsApplied(sequelize: Sequelize): Promise<boolean> {
  const rows = await sequelize.query<{ name: string }>('SELECT name FROM "SequelizeMeta"', {
    type: QueryTypes.SELECT,
  });
  const done = new Set(rows.map((r) => r.name));
  return (await migrationNames()).every((n) => done.has(n));
}

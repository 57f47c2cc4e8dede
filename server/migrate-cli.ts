import { ConfigError, loadConfig } from '../core/config.js';
import { openDatabase } from '../core/database.js';
import { migrate } from '../models/migrate.js';

// `npm run db:migrate`: the same runner as start-up (advisory-locked), against DATABASE_URL or the
// embedded database under DATA_DIR. `npx sequelize-cli db:migrate` works too (see .sequelizerc).
try {
  const config = loadConfig();
  const db = await openDatabase(config, () => {});
  try {
    const applied = await migrate(db.sequelize);
    console.log(applied.length ? `applied: ${applied.join(', ')}` : 'database is up to date');
  } finally {
    await db.close();
  }
} catch (err) {
  console.error(err instanceof ConfigError ? err.message : `migration failed: ${(err as Error).message}`);
  process.exit(1);
}

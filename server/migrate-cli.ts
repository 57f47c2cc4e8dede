import { ConfigError, loadConfig } from '../core/config.js';
import { openDatabase } from '../core/database.js';
import { setFailpoints } from '../core/failpoints.js';
import { migrate } from '../models/migrate.js';

// `npm run db:migrate`: the same runner as start-up (advisory-locked), against DATABASE_URL or the
// embedded database under DATA_DIR. `npx sequelize-cli db:migrate` works too (see .sequelizerc).
try {
  const config = loadConfig();
  // FAILPOINTS (test only; loadConfig refuses it in production): migrate.after-up kills this process
  // between a migration's SQL and its record (test/ops/migrate-crash.test.ts).
  if (config.FAILPOINTS) setFailpoints(config.FAILPOINTS);
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

import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { expect } from 'chai';
import { Sequelize } from 'sequelize';
import { boundQueryInterface, loadMigration, migrate, migrationNames } from '../../models/migrate.js';
import { createIsolatedDatabase, type IsolatedDatabase } from '../support/isolated-database.js';
import { expectServiceAnswers, functionSignatures, recordedMigrations } from '../support/migrations.js';
import { killAll, startInstance } from '../support/processes.js';

/**
 * Issue 26, defect 4: a migration can be run again (a crash before its record used to leave it
 * applied but unrecorded), and no step of a down() leaves out a function the code before it calls.
 */
const run = promisify(execFile);

describe('migrations: run twice, down and up again', function () {
  this.timeout(180000);
  let db: IsolatedDatabase;

  before(async () => {
    db = await createIsolatedDatabase('migrations');
  });
  after(async () => {
    await killAll();
    await db?.drop();
  });

  async function up(name: string): Promise<void> {
    await db.sequelize.transaction((t) =>
      loadMigration(name).up(boundQueryInterface(db.sequelize, t), Sequelize),
    );
  }

  it('when each migration is applied, reverted and applied twice in order, then every step of its down() keeps the functions before it, and the down() restores exactly them', async () => {
    for (const name of await migrationNames()) {
      const before = await functionSignatures(db.sequelize);
      await up(name);
      // As sequelize-cli runs a down(): each query on its own, committed when it returns.
      const stepwise = {
        sequelize: new Proxy(db.sequelize, {
          get: (target, prop, receiver) =>
            prop === 'query'
              ? async (sql: string, options?: object) => {
                  const result = await target.query(sql, options);
                  const now = await functionSignatures(db.sequelize);
                  expect(
                    before.filter((f) => !now.includes(f)),
                    `${name} down(): missing after a step`,
                  ).to.deep.equal([]);
                  return result;
                }
              : Reflect.get(target, prop, receiver),
        }),
      };
      await loadMigration(name).down?.(stepwise, Sequelize);
      expect(await functionSignatures(db.sequelize), `${name} down()`).to.deep.equal(before);
      await up(name);
      await up(name);
    }
  });

  it('when every migration is applied but none recorded (a crash before each record), then the runner runs each up() again and the service answers', async () => {
    expect(await recordedMigrations(db.sequelize)).to.deep.equal([]);
    const applied = await migrate(db.sequelize);
    expect(applied).to.deep.equal(await migrationNames());
    const instance = await startInstance({ DATABASE_URL: db.url });
    await expectServiceAnswers(instance.url);
  });

  it('when sequelize-cli migrates a fresh database, undoes every migration and migrates again (README), then each step succeeds and the runner finds nothing left to do', async () => {
    const fresh = await createIsolatedDatabase('seqcli');
    try {
      const env = { PATH: process.env.PATH ?? '', DATABASE_URL: fresh.url, NODE_ENV: 'test' };
      const cli = (command: string) =>
        run(process.execPath, ['node_modules/sequelize-cli/lib/sequelize', command], { env, timeout: 60000 });
      await cli('db:migrate');
      await cli('db:migrate:undo:all');
      expect(await recordedMigrations(fresh.sequelize)).to.deep.equal([]);
      await cli('db:migrate');
      expect(await recordedMigrations(fresh.sequelize)).to.deep.equal(await migrationNames());
      expect(await migrate(fresh.sequelize)).to.deep.equal([]);
    } finally {
      await fresh.drop();
    }
  });
});

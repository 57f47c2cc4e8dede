import { expect } from 'chai';
import { QueryTypes } from 'sequelize';
import { migrationNames } from '../../models/migrate.js';
import { createIsolatedDatabase, type IsolatedDatabase } from '../support/isolated-database.js';
import {
  expectServiceAnswers,
  functionSignatures,
  recordedMigrations,
  runMigrateCli,
} from '../support/migrations.js';
import { killAll, startInstance } from '../support/processes.js';

/**
 * Issue 26, defect 4: the runner ran a migration's SQL outside the transaction that recorded it, so a
 * process killed between the two left it applied and unrecorded, and the next start-up ran it again
 * (20261125000003 then failed on CREATE FUNCTION: the database could not start). Now both are one
 * transaction: the failpoint migrate.after-up (between them) SIGKILLs a real `npm run db:migrate`.
 */
describe('migrations: killed between apply and record, restarted', function () {
  this.timeout(180000);
  let db: IsolatedDatabase;

  beforeEach(async () => {
    db = await createIsolatedDatabase('migcrash');
  });
  afterEach(async () => {
    await killAll();
    await db?.drop();
  });

  async function tableExists(name: string): Promise<boolean> {
    const [{ present }] = await db.sequelize.query<{ present: boolean }>(
      'SELECT to_regclass(:name) IS NOT NULL AS present',
      { replacements: { name }, type: QueryTypes.SELECT },
    );
    return present;
  }

  it('when the migrate CLI is killed after the up() of 20261125000003, then nothing of it is applied, the ones before are recorded, and a restarted service migrates and answers', async () => {
    const names = await migrationNames();
    const victim = names.indexOf('20261125000003-keyed-create-at-once.cjs');
    const killed = await runMigrateCli(db.url, { FAILPOINTS: `migrate.after-up=sigkill@${victim + 1}` });
    expect(killed.signal, killed.output).to.equal('SIGKILL');
    expect(killed.output).to.include('failpoint migrate.after-up fired: sigkill');

    expect(await recordedMigrations(db.sequelize)).to.deep.equal(names.slice(0, victim));
    const functions = await functionSignatures(db.sequelize);
    expect(functions.filter((f) => f.startsWith('idem_execute('))).to.deep.equal([]);
    expect(functions.filter((f) => f.startsWith('idem_claim('))).to.deep.equal([
      'idem_claim(text,text,text,text,double precision,integer,integer,text,text,double precision)',
    ]);

    const instance = await startInstance({ DATABASE_URL: db.url });
    expect(await recordedMigrations(db.sequelize)).to.deep.equal(names);
    await expectServiceAnswers(instance.url);
  });

  it('when the migrate CLI is killed after the first migration up() on an empty database, then the database is still empty, and the CLI run again migrates it all', async () => {
    const killed = await runMigrateCli(db.url, { FAILPOINTS: 'migrate.after-up=sigkill@1' });
    expect(killed.signal, killed.output).to.equal('SIGKILL');
    expect(await tableExists('users')).to.equal(false);
    expect(await recordedMigrations(db.sequelize)).to.deep.equal([]);

    const again = await runMigrateCli(db.url);
    expect(again.code, again.output).to.equal(0);
    expect(await recordedMigrations(db.sequelize)).to.deep.equal(await migrationNames());
    expect(await tableExists('users')).to.equal(true);
  });
});

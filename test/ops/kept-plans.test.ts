import { expect } from 'chai';
import { QueryTypes } from 'sequelize';
import { migrate } from '../../models/migrate.js';
import { createIsolatedDatabase, type IsolatedDatabase } from '../support/isolated-database.js';

/**
 * Migration 20261128000201: the claim and the effects' Tx 2 keep one generic plan per session. A
 * CREATE OR REPLACE FUNCTION that leaves out the SET clause drops the setting silently, and the
 * statements go back to being planned again on many calls (0.23 ms of planning per claim, measured on
 * PostgreSQL 15): a later migration that redefines one of them must say
 * `SET plan_cache_mode = force_generic_plan`.
 */
const KEPT = ['idem_claim', 'idem_finish_payment', 'idem_finish_refund'];

describe('migrations: the claim and Tx 2 functions keep one generic plan per session', function () {
  this.timeout(60000);
  let db: IsolatedDatabase;

  before(async () => {
    db = await createIsolatedDatabase('keptplans');
    await migrate(db.sequelize);
  });
  after(async () => {
    await db?.drop();
  });

  it('when a database is migrated, then each of them carries plan_cache_mode = force_generic_plan', async () => {
    const rows = await db.sequelize.query<{ name: string; config: string[] | null }>(
      `SELECT p.proname AS name, p.proconfig AS config FROM pg_proc p
        WHERE p.proname IN (:kept) AND p.pronamespace = current_schema()::regnamespace ORDER BY 1`,
      { replacements: { kept: KEPT }, type: QueryTypes.SELECT },
    );
    expect(rows.map((r) => r.name)).to.deep.equal([...KEPT].sort());
    for (const r of rows) expect(r.config ?? [], r.name).to.include('plan_cache_mode=force_generic_plan');
  });
});

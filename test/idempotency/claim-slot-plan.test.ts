import { expect } from 'chai';
import pg from 'pg';
import { migrate } from '../../models/migrate.js';
import { createIsolatedDatabase, type IsolatedDatabase } from '../support/isolated-database.js';

const USER = 'slotplan:1';

/**
 * Migration 20261128000401: idem_claim's free-slot test reads a holder's record by its key whatever
 * the statistics were when the claim was planned. idem_claim keeps one generic plan per connection
 * (20261128000201). Planned on a new database, the older EXISTS form became a hashed SubPlan: once
 * the table had grown, every claim past a held slot read all of idempotency_records. The
 * transaction's own count of sequential scans (pg_stat_get_xact_numscans, read before and after the
 * call in its transaction) shows whether one happened. It is exact, and nothing waits for the
 * statistics.
 */
describe('claims: a held slot is checked by its holder’s key, whatever the plan was made on', function () {
  this.timeout(60000);
  let db: IsolatedDatabase;
  let c: pg.Client;

  before(async () => {
    db = await createIsolatedDatabase('slotplan');
    await migrate(db.sequelize);
    c = new pg.Client(db.url);
    await c.connect();
    // No ANALYZE may replace the plan this connection makes on the empty table.
    for (const t of ['idempotency_records', 'idempotency_slots'])
      await c.query(`ALTER TABLE ${t} SET (autovacuum_enabled = false)`);
    await c.query(
      'INSERT INTO idempotency_slots (user_scope, slot) SELECT $1, g FROM generate_series(1, 3) g',
      [USER],
    );
  });
  after(async () => {
    await c?.end();
    await db?.drop();
  });

  /** A Mode B claim (with a lease, so its record holds its slot) in the caller's transaction. */
  const claim = async (key: string) =>
    (
      await c.query<{ claimed: number | null }>(
        `SELECT claimed FROM idem_claim($1, 'h', $2, 'test', 86400, 3, 1000, NULL, 'owner', 30)`,
        [key, USER],
      )
    ).rows[0].claimed;
  const seqScans = async () =>
    Number(
      (await c.query<{ n: string }>(`SELECT pg_stat_get_xact_numscans('idempotency_records'::regclass) AS n`))
        .rows[0].n,
    );

  it('when a connection planned its claim on a new database and the table grew since, then a claim past a held slot scans no table', async () => {
    // This connection's first claim: the plan it keeps is made on an empty table.
    await c.query('BEGIN');
    expect(await claim('slotplan-first')).to.equal(1);
    await c.query('ROLLBACK');
    // Other users' finished records (no ANALYZE follows), and a payment in flight holding slot 1.
    await c.query(
      `INSERT INTO idempotency_records (scope_key, request_hash, status, user_scope, operation, expires_at)
       SELECT 'other-' || g, 'h', 'SUCCEEDED', 'other:' || g, 'test', now() + interval '1 day'
       FROM generate_series(1, 20000) g`,
    );
    await c.query('BEGIN');
    expect(await claim('slotplan-held')).to.equal(1);
    await c.query('COMMIT');

    await c.query('BEGIN');
    const before = await seqScans();
    const claimed = await claim('slotplan-next');
    const after = await seqScans();
    await c.query('COMMIT');
    expect(claimed, 'slot 1 is held by a PROCESSING record').to.equal(2);
    expect(after - before, 'sequential scans of idempotency_records during the claim').to.equal(0);
  });

  it('when the holder’s record is no longer PROCESSING, then its slot is free again (a stale holder heals)', async () => {
    await c.query(`UPDATE idempotency_records SET status = 'SUCCEEDED' WHERE scope_key = 'slotplan-held'`);
    await c.query('BEGIN');
    expect(await claim('slotplan-healed')).to.equal(1);
    await c.query('ROLLBACK');
  });

  it('when a holder’s record cannot be seen (not committed yet), then its slot stays busy', async () => {
    await c.query(
      `UPDATE idempotency_slots SET holder = 'slotplan-unseen' WHERE user_scope = $1 AND slot = 1`,
      [USER],
    );
    await c.query('BEGIN');
    expect(await claim('slotplan-past-unseen'), 'slot 2 is held by a PROCESSING record').to.equal(3);
    await c.query('ROLLBACK');
  });
});

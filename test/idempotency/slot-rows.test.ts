// A new user's slot rows (idempotency/caps.ts createSlots) are made outside the claim, by every
// instance that has not seen the user yet. One CI run saw a burst of 30 over 3 instances answer one
// request 503 (9 refused, 20 admitted): a creator whose snapshot predated another instance's rows
// reached a row that a claim had already taken, and the unique check waited on that claim's
// transaction until the wait bound. This reproduces that order of events with plain connections.
import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import pg from 'pg';
import { createSequelize } from '../../core/database.js';
import { createSlots } from '../../idempotency/caps.js';
import { sharedServer } from '../support/server.js';

describe('slot rows: making them never waits on a claim (idempotency/caps.ts createSlots)', () => {
  it('when a simple query sends SET LOCAL before its other statements, then the setting holds for them (the implicit transaction createSlots relies on) and is gone after', async () => {
    await sharedServer();
    const client = new pg.Client(process.env.TEST_DATABASE_URL ?? '');
    await client.connect();
    try {
      const results = (await client.query(
        "SET LOCAL lock_timeout = '50ms'; SHOW lock_timeout",
      )) as unknown as Array<{ rows: Array<{ lock_timeout: string }> }>;
      expect(results[1].rows[0].lock_timeout).to.equal('50ms');
      const after = await client.query<{ lock_timeout: string }>('SHOW lock_timeout');
      expect(after.rows[0].lock_timeout).to.not.equal('50ms');
    } finally {
      await client.end();
    }
  });

  it('when the rows are committed after its snapshot and a claim holds one of them, then it returns without a lock time-out and the rows exist', async function () {
    this.timeout(20000);
    await sharedServer(); // the migrated database
    const url = process.env.TEST_DATABASE_URL ?? '';
    // The service's bounds: a 1 s lock_timeout on every connection.
    const sequelize = createSequelize(url, 2, { waitMs: 1000, leaseMs: 30000 });
    const scope = `slot-race-${randomBytes(6).toString('hex')}`;
    const [first, second, claim, watch] = [0, 1, 2, 3].map(() => new pg.Client(url));
    await Promise.all([first, second, claim, watch].map((c) => c.connect()));
    try {
      // Two other creators, each with one row not committed yet.
      await first.query('BEGIN');
      await first.query('INSERT INTO idempotency_slots (user_scope, slot) VALUES ($1, 1)', [scope]);
      await second.query('BEGIN');
      await second.query('INSERT INTO idempotency_slots (user_scope, slot) VALUES ($1, 2)', [scope]);

      // Ours sees neither row and waits on the first one's row 1.
      const ours = createSlots(sequelize, scope, 2).then(
        () => undefined,
        (err: unknown) => err,
      );
      for (let i = 0; ; i++) {
        const { rows } = await watch.query(
          `SELECT count(*)::int AS n FROM pg_stat_activity
           WHERE wait_event_type = 'Lock' AND query LIKE '%INSERT INTO idempotency_slots%'
             AND datname = current_database()`,
        );
        if (rows[0].n > 0) break;
        if (i > 500) throw new Error('createSlots never waited on the uncommitted row');
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
      // Row 2 is committed, and a claim takes it (its counter updated, its transaction open).
      await second.query('COMMIT');
      await claim.query('BEGIN');
      await claim.query(
        'UPDATE idempotency_slots SET retained = retained + 1 WHERE user_scope = $1 AND slot = 2',
        [scope],
      );
      // Row 1 is committed: ours moves on to row 2, which its snapshot did not see.
      await first.query('COMMIT');

      expect(await ours).to.equal(undefined);
      const { rows } = await watch.query(
        'SELECT slot FROM idempotency_slots WHERE user_scope = $1 ORDER BY slot',
        [scope],
      );
      expect(rows.map((r) => r.slot)).to.deep.equal([1, 2]);
    } finally {
      await claim.query('ROLLBACK').catch(() => {});
      await watch.query('DELETE FROM idempotency_slots WHERE user_scope = $1', [scope]).catch(() => {});
      await Promise.all([first, second, claim, watch].map((c) => c.end()));
      await sequelize.close();
    }
  });
});

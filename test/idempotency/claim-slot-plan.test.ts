import { expect } from 'chai';
import pg from 'pg';
import { migrate } from '../../models/migrate.js';
import { createIsolatedDatabase, type IsolatedDatabase } from '../support/isolated-database.js';

const USER = 'slotplan:1';

/** A Mode B claim for USER (with a lease, so its record holds its slot) in the caller's transaction. */
async function claimOn(c: pg.Client, key: string) {
  const { rows } = await c.query<{ claimed: number | null }>(
    `SELECT claimed FROM idem_claim($1, 'h', $2, 'test', 86400, 3, 1000, NULL, 'owner', 30)`,
    [key, USER],
  );
  return rows[0].claimed;
}

/**
 * For a describe block: a fresh migrated database and one connection to it (handed to `use`), with
 * autovacuum off on `tables` so that no ANALYZE replaces the plans the connection makes (`analyzed`:
 * ANALYZEd once while empty), and USER's 3 slot rows.
 */
function planningConnection(
  prefix: string,
  tables: string[],
  analyzed: boolean,
  use: (c: pg.Client) => void,
) {
  let db: IsolatedDatabase | undefined;
  let c: pg.Client | undefined;
  before(async () => {
    db = await createIsolatedDatabase(prefix);
    await migrate(db.sequelize);
    c = new pg.Client(db.url);
    await c.connect();
    use(c);
    for (const t of tables) await c.query(`ALTER TABLE ${t} SET (autovacuum_enabled = false)`);
    if (analyzed) await c.query(`ANALYZE ${tables.join(', ')}`);
    await c.query(
      'INSERT INTO idempotency_slots (user_scope, slot) SELECT $1, g FROM generate_series(1, 3) g',
      [USER],
    );
  });
  after(async () => {
    await c?.end();
    await db?.drop();
  });
}

/**
 * Migration 20261128000401: idem_claim's free-slot test reads a holder's record by its key also when
 * the claim was planned on tables never ANALYZEd. idem_claim keeps one generic plan per connection
 * (20261128000201). Planned on a new database, the older EXISTS form became a hashed SubPlan: once
 * the table had grown, every claim past a held slot read all of idempotency_records. The
 * transaction's own count of sequential scans (pg_stat_get_xact_numscans, read before and after the
 * call in its transaction) shows whether one happened. It is exact, and nothing waits for the
 * statistics.
 */
describe('claims: a held slot is checked by its holder’s key, whatever the plan was made on', function () {
  this.timeout(60000);
  let c: pg.Client;
  // No ANALYZE may replace the plan this connection makes on the empty table.
  planningConnection('slotplan', ['idempotency_records', 'idempotency_slots'], false, (x) => {
    c = x;
  });
  const claim = (key: string) => claimOn(c, key);
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

/**
 * Migration 20261128000501: the claim and Tx 2 keep index plans made on tables ANALYZEd while empty
 * (a new deployment's first minute), where PostgreSQL's generic plan for each of their statements is
 * a sequential scan, kept by the connection until the next ANALYZE. One payment plans them on empty
 * tables; after the tables grew (no ANALYZE: autovacuum is off), the next payment's claim and Tx 2
 * must not scan any of them.
 */
describe('kept plans: the claim and Tx 2 read by key on tables analyzed while empty', function () {
  this.timeout(60000);
  const TABLES = ['idempotency_records', 'idempotency_slots', 'payments', 'orders'];
  let c: pg.Client;
  planningConnection('keptplan', TABLES, true, (x) => {
    c = x;
  });

  /** This transaction's sequential scans so far, per table (read before and after a call). */
  const seqScans = async () => {
    const { rows } = await c.query<{ t: string; n: string }>(
      'SELECT t, pg_stat_get_xact_numscans(t::regclass) AS n FROM unnest($1::text[]) t',
      [TABLES],
    );
    return Object.fromEntries(rows.map((r) => [r.t, Number(r.n)]));
  };
  /** The sequential scans `call` made, per table, in the caller's transaction. */
  async function scansOf<T>(call: () => Promise<T>): Promise<{ value: T; scans: Record<string, number> }> {
    const before = await seqScans();
    const value = await call();
    const after = await seqScans();
    return { value, scans: Object.fromEntries(TABLES.map((t) => [t, after[t] - before[t]])) };
  }
  const none = Object.fromEntries(TABLES.map((t) => [t, 0]));

  const claim = (key: string) => claimOn(c, key);

  /** One payment as the service writes it: Tx 1 (the claim, the payment row, the link), then Tx 2. */
  async function pay(n: number) {
    const key = `keptplan-${n}`;
    const order = (
      await c.query<{ id: string }>(
        `INSERT INTO orders (tenant_id, user_id, merchant_order_no, amount, currency)
         VALUES ('kp', 7, $1, 10.50, 'USD') RETURNING id::text`,
        [`kp-${n}`],
      )
    ).rows[0].id;
    await c.query('BEGIN');
    const claimed = await scansOf(() => claim(key));
    await c.query(
      `INSERT INTO payments (id, payment_no, merchant_id, merchant_order_no, order_id, user_id, amount, currency)
       VALUES ($1, $2, 'kp', $3, $4, 7, 10.50, 'USD')`,
      [`pay_kp_${n}`, `PN-kp-${n}`, `kp-${n}`, order],
    );
    await c.query('UPDATE idempotency_records SET resource_id = $1 WHERE scope_key = $2', [
      `pay_kp_${n}`,
      key,
    ]);
    await c.query('COMMIT');
    await c.query('BEGIN');
    const finished = await scansOf(
      async () =>
        (
          await c.query<{ done: number }>(
            `SELECT idem_finish_payment($1, 'owner', 'SUCCEEDED', 201, '{}', 'SUCCEEDED', NULL, $2, now(), $3, $4, true) AS done`,
            [key, `ch_${n}`, `pay_kp_${n}`, order],
          )
        ).rows[0].done,
    );
    await c.query('COMMIT');
    return { claimed, finished };
  }

  it('when a connection planned them on empty tables and the tables grew since, then the next payment scans no table', async () => {
    // This connection's first payment: the plans it keeps are made on the empty tables.
    const first = await pay(0);
    expect([first.claimed.value, first.finished.value]).to.deep.equal([1, 1]);
    // Other users' slot rows, finished records, orders and payments (no ANALYZE follows), and a
    // payment in flight holding slot 1.
    await c.query(
      `INSERT INTO idempotency_slots (user_scope, slot) SELECT 'other:' || g, 1 FROM generate_series(1, 20000) g`,
    );
    await c.query(
      `INSERT INTO idempotency_records (scope_key, request_hash, status, user_scope, operation, expires_at)
       SELECT 'other-' || g, 'h', 'SUCCEEDED', 'other:' || g, 'test', now() + interval '1 day'
       FROM generate_series(1, 20000) g`,
    );
    await c.query(
      `WITH o AS (
         INSERT INTO orders (tenant_id, user_id, merchant_order_no, amount, currency, status)
         SELECT 'other', g, 'o-' || g, 10.50, 'USD', 'PAID' FROM generate_series(1, 20000) g RETURNING id, user_id)
       INSERT INTO payments (id, payment_no, merchant_id, merchant_order_no, order_id, user_id, amount, currency, status)
       SELECT 'pay_o_' || id, 'PN-o-' || id, 'other', 'o-' || user_id, id, user_id, 10.50, 'USD', 'SUCCEEDED' FROM o`,
    );
    await c.query('BEGIN');
    expect(await claim('keptplan-held')).to.equal(1);
    await c.query('COMMIT');

    const next = await pay(1);
    expect(next.claimed.value, 'slot 1 is held by a PROCESSING record').to.equal(2);
    expect(next.finished.value).to.equal(1);
    expect(next.claimed.scans, 'sequential scans during the claim').to.deep.equal(none);
    expect(next.finished.scans, 'sequential scans during Tx 2').to.deep.equal(none);
  });
});

import { expect } from 'chai';
import pg from 'pg';
import { migrate } from '../../models/migrate.js';
import { createIsolatedDatabase, type IsolatedDatabase } from '../support/isolated-database.js';

const N = 120;
const MERCHANT = 'hot-m';

/**
 * Migration 20261128000301: Tx 2's updates of the payment, its order and a refund are HOT updates
 * (a new version on the row's page, no new index entries). A partial index whose predicate names
 * `status` (the dropped payments_status_idx) makes every finalise of a payment write an entry in each
 * of payments' unique indexes; pages filled to the brim leave the new version no room. Rows are
 * written as the service writes them: every Tx 1 first (pages filled by PROCESSING rows, as under
 * load), then each Tx 2 in its own transaction through the functions the service calls, counting the
 * transaction's own updates (pg_stat_get_xact_*: exact, nothing waits for the statistics collector).
 */
describe('payments: Tx 2 updates the payment, its order and a refund in place (HOT)', function () {
  this.timeout(60000);
  let db: IsolatedDatabase;
  let c: pg.Client;

  before(async () => {
    db = await createIsolatedDatabase('hotfin');
    await migrate(db.sequelize);
    c = new pg.Client(db.url);
    await c.connect();
    // A snapshot held meanwhile (an autovacuum's ANALYZE of these new tables) would keep the old
    // versions from being pruned, and the page's room with them: not what this test is about.
    for (const t of ['orders', 'payments', 'refunds', 'idempotency_records'])
      await c.query(`ALTER TABLE ${t} SET (autovacuum_enabled = false)`);
    await c.query(
      `INSERT INTO orders (tenant_id, user_id, merchant_order_no, amount, currency)
       SELECT $1, 7, 'o-' || g, 10.50, 'USD' FROM generate_series(1, $2::int) g`,
      [MERCHANT, N],
    );
  });
  after(async () => {
    await c?.end();
    await db?.drop();
  });

  type Counts = Record<string, { updated: number; hot: number }>;
  /** Tx 2's parameters after the scope key: the owner, the record's and the resource's final state. */
  const FINAL = ['owner', 'SUCCEEDED', 201, '{}', 'SUCCEEDED', null];

  /** Tx 1 for each: the resource row and its PROCESSING record (owned, with a lease), committed together. */
  async function writeAll<T>(
    items: T[],
    insert: string,
    values: (x: T) => unknown[],
    key: (x: T) => [string, string],
  ) {
    for (const x of items) {
      await c.query('BEGIN');
      await c.query(insert, values(x));
      await c.query(
        `INSERT INTO idempotency_records (scope_key, request_hash, status, resource_id, owner_token,
                                          lease_until, user_scope, operation, expires_at)
         VALUES ($1, 'h', 'PROCESSING', $2, 'owner', now() + interval '1 minute', $3, 'test', now() + interval '1 day')`,
        [...key(x), `${MERCHANT}:7`],
      );
      await c.query('COMMIT');
    }
  }

  /**
   * Tx 2 for each, one transaction each through `call`; per table, its updates and how many were HOT.
   * The backend's counts not yet sent to the statistics (they may span earlier transactions) are read
   * before and after the call, in its transaction: nothing is sent in between.
   */
  async function finaliseAll<T>(items: T[], call: string, params: (x: T) => unknown[], tables: string[]) {
    const read = async () =>
      (
        await c.query<{ t: string; updated: string; hot: string }>(
          `SELECT t, pg_stat_get_xact_tuples_updated(t::regclass) AS updated,
                  pg_stat_get_xact_tuples_hot_updated(t::regclass) AS hot
             FROM unnest($1::text[]) t ORDER BY t`,
          [tables],
        )
      ).rows;
    const seen: Counts = {};
    for (const x of items) {
      await c.query('BEGIN');
      const before = await read();
      const { rows } = await c.query<{ done: number }>(`SELECT ${call} AS done`, params(x));
      const after = await read();
      await c.query('COMMIT');
      expect(rows[0].done).to.equal(1);
      after.forEach((r, i) => {
        const t = seen[r.t] ?? { updated: 0, hot: 0 };
        t.updated += Number(r.updated) - Number(before[i].updated);
        t.hot += Number(r.hot) - Number(before[i].hot);
        seen[r.t] = t;
      });
    }
    return seen;
  }

  it('when every payment is finalised after all were written, then each update of payments and orders is HOT', async () => {
    const { rows: orders } = await c.query<{ id: string; no: string }>(
      'SELECT id::text, merchant_order_no AS no FROM orders ORDER BY id',
    );
    await writeAll(
      orders,
      `INSERT INTO payments (id, payment_no, merchant_id, merchant_order_no, order_id, user_id, amount, currency)
       VALUES ($1, $2, $3, $4, $5, 7, 10.50, 'USD')`,
      (o) => [`pay_hot_${o.id}`, `PN-hot-${o.id}`, MERCHANT, o.no, o.id],
      (o) => [`pay-${o.id}`, `pay_hot_${o.id}`],
    );
    const seen = await finaliseAll(
      orders,
      'idem_finish_payment($1, $2, $3, $4, $5, $6, $7, $8, now(), $9, $10, true)',
      (o) => [`pay-${o.id}`, ...FINAL, `ch_${o.id}`, `pay_hot_${o.id}`, o.id],
      ['payments', 'orders'],
    );
    expect(seen.payments).to.deep.equal({ updated: N, hot: N });
    expect(seen.orders).to.deep.equal({ updated: N, hot: N });
  });

  it('when refunds are finalised after all were written, then each update of refunds and of the payment refunded is HOT', async () => {
    const { rows: payments } = await c.query<{ id: string; no: string; order: string }>(
      `SELECT id, merchant_order_no AS no, order_id::text AS order FROM payments ORDER BY order_id`,
    );
    expect(payments).to.have.length(N);
    await writeAll(
      payments,
      `INSERT INTO refunds (id, refund_no, payment_id, merchant_id, user_id, merchant_order_no, amount, currency)
       VALUES ($1, $2, $3, $4, 7, $5, 1.50, 'USD')`,
      (p) => [`ref_hot_${p.order}`, `RN-hot-${p.order}`, p.id, MERCHANT, p.no],
      (p) => [`ref-${p.order}`, `ref_hot_${p.order}`],
    );
    const seen = await finaliseAll(
      payments,
      'idem_finish_refund($1, $2, $3, $4, $5, $6, $7, $8, now(), $9, true)',
      (p) => [`ref-${p.order}`, ...FINAL, `gr_${p.order}`, `ref_hot_${p.order}`],
      ['refunds', 'payments'],
    );
    expect(seen.refunds).to.deep.equal({ updated: N, hot: N });
    expect(seen.payments).to.deep.equal({ updated: N, hot: N });
    const { rows } = await c.query<{ n: number }>(
      "SELECT count(*)::int AS n FROM payments WHERE amount_refunded = 1.50 AND status = 'SUCCEEDED'",
    );
    expect(rows[0].n).to.equal(N);
  });
});

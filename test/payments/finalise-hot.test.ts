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

  /** Tx 1's record: PROCESSING, owned, with a lease (what the claim inserts). */
  async function record(scope: string, resource: string) {
    await c.query(
      `INSERT INTO idempotency_records (scope_key, request_hash, status, resource_id, owner_token,
                                        lease_until, user_scope, operation, expires_at)
       VALUES ($1, 'h', 'PROCESSING', $2, 'owner', now() + interval '1 minute', $3, 'test', now() + interval '1 day')`,
      [scope, resource, `${MERCHANT}:7`],
    );
  }

  /** One Tx 2 through `call`, and how many of the table's updates in it were HOT. */
  async function finalise(call: string, params: unknown[], tables: string[]) {
    // The backend's counts not yet sent to the statistics (they may span earlier transactions), read
    // before and after the call, in its transaction: nothing is sent in between.
    const read = async () =>
      (
        await c.query<{ t: string; updated: string; hot: string }>(
          `SELECT t, pg_stat_get_xact_tuples_updated(t::regclass) AS updated,
                  pg_stat_get_xact_tuples_hot_updated(t::regclass) AS hot
             FROM unnest($1::text[]) t ORDER BY t`,
          [tables],
        )
      ).rows;
    await c.query('BEGIN');
    const before = await read();
    const { rows } = await c.query<{ done: number }>(`SELECT ${call} AS done`, params);
    const after = await read();
    await c.query('COMMIT');
    expect(rows[0].done).to.equal(1);
    return after.map((r, i) => ({
      t: r.t,
      updated: Number(r.updated) - Number(before[i].updated),
      hot: Number(r.hot) - Number(before[i].hot),
    }));
  }

  function tally(
    into: Record<string, { updated: number; hot: number }>,
    rows: { t: string; updated: number; hot: number }[],
  ) {
    for (const r of rows) {
      const t = into[r.t] ?? { updated: 0, hot: 0 };
      t.updated += r.updated;
      t.hot += r.hot;
      into[r.t] = t;
    }
  }

  it('when every payment is finalised after all were written, then each update of payments and orders is HOT', async () => {
    const { rows: orders } = await c.query<{ id: string; no: string }>(
      'SELECT id::text, merchant_order_no AS no FROM orders ORDER BY id',
    );
    for (const o of orders) {
      await c.query('BEGIN');
      await c.query(
        `INSERT INTO payments (id, payment_no, merchant_id, merchant_order_no, order_id, user_id, amount, currency)
         VALUES ($1, $2, $3, $4, $5, 7, 10.50, 'USD')`,
        [`pay_hot_${o.id}`, `PN-hot-${o.id}`, MERCHANT, o.no, o.id],
      );
      await record(`pay-${o.id}`, `pay_hot_${o.id}`);
      await c.query('COMMIT');
    }
    const seen: Record<string, { updated: number; hot: number }> = {};
    for (const o of orders) {
      tally(
        seen,
        await finalise(
          'idem_finish_payment($1, $2, $3, $4, $5, $6, $7, $8, now(), $9, $10, true)',
          [
            `pay-${o.id}`,
            'owner',
            'SUCCEEDED',
            201,
            '{}',
            'SUCCEEDED',
            null,
            `ch_${o.id}`,
            `pay_hot_${o.id}`,
            o.id,
          ],
          ['payments', 'orders'],
        ),
      );
    }
    expect(seen.payments).to.deep.equal({ updated: N, hot: N });
    expect(seen.orders).to.deep.equal({ updated: N, hot: N });
  });

  it('when refunds are finalised after all were written, then each update of refunds and of the payment refunded is HOT', async () => {
    const { rows: payments } = await c.query<{ id: string; no: string; order: string }>(
      `SELECT id, merchant_order_no AS no, order_id::text AS order FROM payments ORDER BY order_id`,
    );
    expect(payments).to.have.length(N);
    for (const p of payments) {
      await c.query('BEGIN');
      await c.query(
        `INSERT INTO refunds (id, refund_no, payment_id, merchant_id, user_id, merchant_order_no, amount, currency)
         VALUES ($1, $2, $3, $4, 7, $5, 1.50, 'USD')`,
        [`ref_hot_${p.order}`, `RN-hot-${p.order}`, p.id, MERCHANT, p.no],
      );
      await record(`ref-${p.order}`, `ref_hot_${p.order}`);
      await c.query('COMMIT');
    }
    const seen: Record<string, { updated: number; hot: number }> = {};
    for (const p of payments) {
      tally(
        seen,
        await finalise(
          'idem_finish_refund($1, $2, $3, $4, $5, $6, $7, $8, now(), $9, true)',
          [
            `ref-${p.order}`,
            'owner',
            'SUCCEEDED',
            201,
            '{}',
            'SUCCEEDED',
            null,
            `gr_${p.order}`,
            `ref_hot_${p.order}`,
          ],
          ['refunds', 'payments'],
        ),
      );
    }
    expect(seen.refunds).to.deep.equal({ updated: N, hot: N });
    expect(seen.payments).to.deep.equal({ updated: N, hot: N });
    const { rows } = await c.query<{ n: number }>(
      "SELECT count(*)::int AS n FROM payments WHERE amount_refunded = 1.50 AND status = 'SUCCEEDED'",
    );
    expect(rows[0].n).to.equal(N);
  });
});

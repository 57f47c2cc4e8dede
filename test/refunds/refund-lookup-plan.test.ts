import { expect } from 'chai';
import pg from 'pg';
import { migrate } from '../../models/migrate.js';
import { createIsolatedDatabase, type IsolatedDatabase } from '../support/isolated-database.js';

const MERCHANT = 'plan-m';
const PAYMENTS = 1000;
const paymentId = (i: number) => `pay_${String(i).padStart(24, '0')}`;

/**
 * idem_refund_lookup (migration 20261128000101) reaches the payment by its primary key only. Its
 * earlier text (`id = … AND merchant_id = … FOR UPDATE`), planned by PL/pgSQL once per session while
 * the table had no statistics, took payments_merchant_order_key and read every payment of the merchant
 * for each refund until an ANALYZE. A fresh database with autovacuum off on payments keeps that state
 * for the whole test; the index statistics say which index the lookups used.
 */
describe('refunds: the payment lookup of Tx 1 uses the payment key, with or without statistics', function () {
  this.timeout(60000);
  let db: IsolatedDatabase;
  let a: pg.Client;
  let b: pg.Client;

  before(async () => {
    db = await createIsolatedDatabase('refplan');
    await migrate(db.sequelize);
    a = new pg.Client(db.url);
    b = new pg.Client(db.url);
    await a.connect();
    await b.connect();
    await a.query('ALTER TABLE payments SET (autovacuum_enabled = false)');
    await a.query('ALTER TABLE orders SET (autovacuum_enabled = false)');
    // Seeding, not the service's writes: the outbox's triggers stay out of it.
    await a.query('ALTER TABLE orders DISABLE TRIGGER orders_event');
    await a.query('ALTER TABLE payments DISABLE TRIGGER payments_event');
    await a.query(
      `INSERT INTO orders (tenant_id, user_id, merchant_order_no, amount, currency)
       SELECT CASE WHEN g % 100 = 0 THEN 'plan-other' ELSE $1 END, 7, 'o-' || g, 10.50, 'USD'
         FROM generate_series(1, $2::int) g`,
      [MERCHANT, PAYMENTS],
    );
    await a.query(
      `INSERT INTO payments (id, payment_no, merchant_id, merchant_order_no, order_id, user_id, amount,
                             currency, status, charge_id)
       SELECT 'pay_' || lpad(o.id::text, 24, '0'), 'PN' || o.id, o.tenant_id, o.merchant_order_no, o.id, 7,
              10.50, 'USD', 'SUCCEEDED', 'ch_' || o.id FROM orders o`,
    );
  });
  after(async () => {
    await a?.end();
    await b?.end();
    await db?.drop();
  });

  /** The lookup as Tx 1 sends it: in a transaction whose claim of `scope` happened (idem.claimed). */
  async function lookup(id: string, merchant: string, claimed = true) {
    await a.query('BEGIN');
    if (claimed) await a.query("SELECT set_config('idem.claimed', 'scope-1', true)");
    const { rows } = await a.query('SELECT * FROM idem_refund_lookup($1, $2, $3)', ['scope-1', id, merchant]);
    return rows;
  }

  async function indexScans(): Promise<Record<string, number>> {
    await a.query('SELECT pg_stat_force_next_flush()');
    await a.query('SELECT 1'); // the flush happens before this statement's answer
    const { rows } = await b.query<{ index: string; scans: string }>(
      `SELECT indexrelname AS index, idx_scan::text AS scans FROM pg_stat_user_indexes WHERE relname = 'payments'`,
    );
    await b.query('SELECT pg_stat_clear_snapshot()');
    return Object.fromEntries(rows.map((r) => [r.index, Number(r.scans)]));
  }

  it('finds the payment of this merchant, locked, with what its refunds have taken', async () => {
    const rows = await lookup(paymentId(1), MERCHANT);
    expect(rows).to.have.length(1);
    expect(rows[0]).to.include({ amount: '10.50', currency: 'USD', status: 'SUCCEEDED', taken: '0' });
    const locked = await b
      .query('SELECT 1 FROM payments WHERE id = $1 FOR UPDATE NOWAIT', [paymentId(1)])
      .then(() => false)
      .catch((err: { code?: string }) => err.code === '55P03');
    await a.query('ROLLBACK');
    expect(locked).to.equal(true);
  });

  it("answers nothing for another merchant's payment, and leaves it unlocked", async () => {
    const rows = await lookup(paymentId(100), MERCHANT); // order 100 is plan-other's
    const free = await b.query('SELECT 1 FROM payments WHERE id = $1 FOR UPDATE NOWAIT', [paymentId(100)]);
    await a.query('ROLLBACK');
    expect(rows).to.deep.equal([]);
    expect(free.rowCount).to.equal(1);
  });

  it('answers nothing when the claim did not happen in this transaction', async () => {
    const rows = await lookup(paymentId(2), MERCHANT, false);
    await a.query('ROLLBACK');
    expect(rows).to.deep.equal([]);
  });

  it("reads no index on the merchant's payments, in a session whose plan was made without statistics", async () => {
    const { rows } = await a.query<{ reltuples: number }>(
      "SELECT reltuples FROM pg_class WHERE oid = 'payments'::regclass",
    );
    expect(rows[0].reltuples, 'the payments table must have no statistics for this test').to.equal(-1);
    const before = await indexScans();
    // More than five calls: PL/pgSQL then keeps a generic plan for the session.
    for (let i = 1; i <= 12; i++) {
      const found = await lookup(paymentId(i), MERCHANT);
      await a.query('ROLLBACK');
      expect(found).to.have.length(1);
    }
    const after = await indexScans();
    expect(after.payments_merchant_order_key - before.payments_merchant_order_key).to.equal(0);
    expect(after.payments_pkey - before.payments_pkey).to.be.at.least(12);
  });
});

// After the gateway call, one more transaction records what it did: Tx 2 after a charge, or the
// resumable mark after a 5xx (nothing charged). When that transaction cannot be written (here: the
// test holds the payment's row lock while the gateway is slow to answer, so the UPDATE ends at
// lock_timeout, the 300 ms wait bound), the payment stays PROCESSING under its lease and the
// recoverer finishes it after the lease (query first, then charge). Its client must then hear 202,
// not 503: a 503 tells a client that nothing was charged (CONTRACT section 3), and one that gave up
// would find its order charged later. The mark's case was found by gateway-outage.test.ts on a
// loaded machine (a pooled connection not had within the wait bound gave "Database unavailable" 503,
// then the recoverer charged the payment); Tx 2's by reading the code after it (503 "Database busy"
// for a payment the gateway had charged). Refunds run on the same mechanism (idempotency/effect-run.ts)
// with their own Tx 2 and mark, which update the refund row: the same two cases for a refund.
import { setTimeout as sleep } from 'node:timers/promises';
import { expect } from 'chai';
import { QueryTypes } from 'sequelize';
import type { Faults } from '../../gateway/types.js';
import { type GatewaySlot, startGatewaySlot } from '../support/gateway-slot.js';
import { type HttpResult, http } from '../support/http.js';
import { createIsolatedDatabase, type IsolatedDatabase } from '../support/isolated-database.js';
import { createOrder } from '../support/orders.js';
import { pay, payUntilFinal, shortLeaseEnv, untilFinal } from '../support/payment-calls.js';
import { assertPaymentInvariants } from '../support/payment-invariants.js';
import { type Instance, startInstance } from '../support/processes.js';
import { assertRefundInvariants, paidPayment, refund } from '../support/refunds.js';
import { bearer, idempotencyKey, uniqueTenant } from '../support/tokens.js';

describe('payments and refunds: what the gateway did cannot be written (the resource row held)', function () {
  this.timeout(60000);
  let db: IsolatedDatabase;
  let slot: GatewaySlot;
  let instance: Instance;

  before(async () => {
    db = await createIsolatedDatabase('markfail');
    slot = await startGatewaySlot();
    await slot.simulator();
    // The gateway's answer (1 s late) well inside its time-out and the lease.
    instance = await startInstance(
      shortLeaseEnv(db.url, slot.url, { IDEMPOTENCY_LEASE_MS: '8000', GATEWAY_TIMEOUT_MS: '3000' }),
    );
  });
  beforeEach(() => slot.client.setFaults({}));
  after(async () => {
    await instance?.stop();
    await slot?.close();
    await db?.drop();
  });

  /**
   * `answer` (a request the gateway answers 1 s late) while the test holds, from Tx 1's commit until
   * the answer, the row that `select` finds FOR UPDATE: the resource that Tx 2 or the mark must update.
   */
  async function whileRowHeld(answer: Promise<HttpResult>, select: string, bind: string[]) {
    const t = await db.sequelize.transaction();
    try {
      let locked = 0;
      for (let i = 0; i < 100 && locked === 0; i++) {
        const rows = await db.sequelize.query(`${select} FOR UPDATE`, {
          bind,
          transaction: t,
          type: QueryTypes.SELECT,
        });
        locked = rows.length;
        if (locked === 0) await sleep(10);
      }
      expect(locked, 'the row, locked while the gateway is slow').to.equal(1);
      return await answer;
    } finally {
      await t.rollback();
    }
  }

  /** The one row of `table` whose `column` is `value`: still PROCESSING? resumable (nothing done downstream)? */
  async function rowOf(table: 'payments' | 'refunds', column: 'merchant_id' | 'payment_id', value: string) {
    const rows = await db.sequelize.query<{ id: string; status: string; resumable: boolean }>(
      `SELECT id, status, resumable_since IS NOT NULL AS resumable FROM ${table} WHERE ${column} = $1`,
      { bind: [value], type: QueryTypes.SELECT },
    );
    expect(rows, `${table} of ${value}`).to.have.length(1);
    return rows[0];
  }

  /**
   * Pays an order while the gateway answers `faults` 1 s late and the test holds the payment's row:
   * the first answer, then the same key until final.
   */
  async function payWhileRowHeld(faults: Faults) {
    const tenant = uniqueTenant('mark');
    const auth = bearer(tenant, '860000001');
    await createOrder(instance.url, auth, 'mo-1', '25.00');
    const body = { merchantOrderNo: 'mo-1', amount: '25.00' };
    await slot.client.setFaults({ ...faults, latencyMs: 1000 });
    const key = idempotencyKey();
    const first = await whileRowHeld(
      pay(instance.url, auth, key, body),
      `SELECT id FROM payments WHERE merchant_id = $1 AND merchant_order_no = 'mo-1'`,
      [tenant],
    );
    await slot.client.setFaults({});
    const row = await rowOf('payments', 'merchant_id', tenant);
    const then = await payUntilFinal(instance.url, auth, key, body);
    return { tenant, first, row, ...then };
  }

  /**
   * The first answer 202 (the payment left PROCESSING, not resumable, under its lease); the same key
   * then gets 202 until the recoverer has finished it, and 201 SUCCEEDED with exactly one charge.
   */
  async function expectFinishedByRecoverer(paid: Awaited<ReturnType<typeof payWhileRowHeld>>, what: string) {
    const { tenant, first, row, final, statuses } = paid;
    expect(row, `${what} was not written`).to.include({ status: 'PROCESSING', resumable: false });
    expect(first.status, first.text).to.equal(202);
    expect(first.headers.get('location')).to.match(/^\/api\/v1\/payments\/pay_/);
    expect(Number(first.headers.get('retry-after'))).to.be.greaterThan(0);
    expect(
      statuses.filter((s) => s !== 202),
      `${statuses}`,
    ).to.deep.equal([201]);
    expect(final.status, final.text).to.equal(201);
    expect(final.body.data.status).to.equal('SUCCEEDED');
    const payments = await assertPaymentInvariants(db.sequelize, () => slot.ledger(), tenant, {
      exclusiveLedger: true,
    });
    expect(payments).to.have.length(1);
    const charges = (await slot.ledger()).charges.filter((c) => c.paymentNo === payments[0].paymentNo);
    expect(charges).to.have.length(1);
  }

  it('when the mark after a 5xx meets a held row lock, then 202 with Location (not 503), and the payment is charged once by the recoverer', async () => {
    await expectFinishedByRecoverer(await payWhileRowHeld({ errorRate: 1 }), 'the mark');
  });

  it('when Tx 2 after a charge meets a held row lock, then 202 with Location (not 503), and that one charge is recorded, SUCCEEDED', async () => {
    await expectFinishedByRecoverer(await payWhileRowHeld({}), 'Tx 2');
  });

  /**
   * The same for a refund (the same mechanism, its own Tx 2 and mark, which update the refund row):
   * 45.00 of a 60.00 payment refunded while the test holds the refund's row. The first answer 202
   * with the refund as Location; the same key then 202 until the recoverer has finished it (query
   * first, then refund), and 201 SUCCEEDED with exactly one refund at the gateway, counted once in
   * the payment's amountRefunded.
   */
  async function expectRefundFinishedByRecoverer(faults: Faults, what: string) {
    const tenant = uniqueTenant('rmark');
    const auth = bearer(tenant, '860000002');
    const payment = await paidPayment(instance.url, auth, '60.00');
    await slot.client.setFaults({ ...faults, latencyMs: 1000 });
    const key = idempotencyKey();
    const send = () => refund(instance.url, auth, payment.id, key, { amount: '45' });
    const first = await whileRowHeld(send(), 'SELECT id FROM refunds WHERE payment_id = $1', [payment.id]);
    await slot.client.setFaults({});
    const row = await rowOf('refunds', 'payment_id', payment.id);
    expect(row, `${what} was not written`).to.include({ status: 'PROCESSING', resumable: false });
    expect(first.status, first.text).to.equal(202);
    expect(first.body.data).to.deep.equal({ status: 'PROCESSING', resourceId: row.id });
    expect(first.headers.get('location')).to.equal(`/api/v1/refunds/${row.id}`);
    expect(Number(first.headers.get('retry-after'))).to.be.greaterThan(0);
    const { final, statuses } = await untilFinal(send, `refund ${row.id}`);
    expect(
      statuses.filter((s) => s !== 202),
      `${statuses}`,
    ).to.deep.equal([201]);
    expect(final.status, final.text).to.equal(201);
    expect(final.body.data).to.include({ id: row.id, status: 'SUCCEEDED', amount: '45.00' });
    await assertRefundInvariants(db.sequelize, () => slot.ledger(), tenant, { settled: true });
    const made = (await slot.ledger()).refunds.filter((r) => r.refundNo === final.body.data.refundNo);
    expect(made.map((r) => r.status)).to.deep.equal(['SUCCEEDED']);
    const paid = await http('GET', `/api/v1/payments/${payment.id}`, {
      baseUrl: instance.url,
      headers: auth,
    });
    expect(paid.body.data.amountRefunded).to.equal('45.00');
  }

  it('when the mark after a refund 5xx meets a held row lock, then 202 with the refund as Location (not 503), and the recoverer refunds once', async () => {
    await expectRefundFinishedByRecoverer({ errorRate: 1 }, 'the mark');
  });

  it("when a refund's Tx 2 meets a held row lock, then 202 with the refund as Location (not 503), and that one refund is recorded, SUCCEEDED", async () => {
    await expectRefundFinishedByRecoverer({}, 'Tx 2');
  });
});

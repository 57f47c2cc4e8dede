// A payment whose charge certainly failed (a gateway 5xx) is marked resumable in one more transaction.
// When that mark cannot be written (here: the test holds the payment's row lock while the gateway is
// slow to answer its 5xx, so the mark's UPDATE ends at lock_timeout, the 300 ms wait bound), the payment stays PROCESSING under its lease and the recoverer finishes it after the lease
// (query first, then charge). Its client must then hear 202, not 503: a 503 tells a client that
// nothing was charged (CONTRACT section 3), and one that gave up would find its order charged later.
// Found by test/payments/gateway-outage.test.ts on a loaded machine (a pooled connection not had
// within the wait bound gave "Database unavailable" 503, then the recoverer charged the payment).
import { setTimeout as sleep } from 'node:timers/promises';
import { expect } from 'chai';
import { QueryTypes } from 'sequelize';
import { type GatewaySlot, startGatewaySlot } from '../support/gateway-slot.js';
import type { HttpResult } from '../support/http.js';
import { createIsolatedDatabase, type IsolatedDatabase } from '../support/isolated-database.js';
import { createOrder } from '../support/orders.js';
import { pay, payUntilFinal, shortLeaseEnv } from '../support/payment-calls.js';
import { assertPaymentInvariants } from '../support/payment-invariants.js';
import { type Instance, startInstance } from '../support/processes.js';
import { bearer, idempotencyKey, uniqueTenant } from '../support/tokens.js';

describe('payments: the resumable mark after a 5xx cannot be written', function () {
  this.timeout(60000);
  let db: IsolatedDatabase;
  let slot: GatewaySlot;
  let instance: Instance;

  before(async () => {
    db = await createIsolatedDatabase('markfail');
    slot = await startGatewaySlot();
    await slot.simulator();
    // The charge's answer (1 s late) well inside the gateway's time-out and the lease.
    instance = await startInstance(
      shortLeaseEnv(db.url, slot.url, { IDEMPOTENCY_LEASE_MS: '8000', GATEWAY_TIMEOUT_MS: '3000' }),
    );
  });
  after(async () => {
    await instance?.stop();
    await slot?.close();
    await db?.drop();
  });

  it('when the mark after a 5xx meets a held row lock, then 202 with Location (not 503), and the payment is charged once by the recoverer', async () => {
    const tenant = uniqueTenant('mark');
    const auth = bearer(tenant, '860000001');
    await createOrder(instance.url, auth, 'mo-1', '25.00');
    const body = { merchantOrderNo: 'mo-1', amount: '25.00' };
    await slot.client.setFaults({ errorRate: 1, latencyMs: 1000 });
    const key = idempotencyKey();
    const answer = pay(instance.url, auth, key, body);
    // Tx 1 has committed the payment: hold its row until the answer comes.
    const t = await db.sequelize.transaction();
    let locked = 0;
    let first: HttpResult;
    try {
      for (let i = 0; i < 100 && locked === 0; i++) {
        const rows = await db.sequelize.query(
          `SELECT id FROM payments WHERE merchant_id = $1 AND merchant_order_no = 'mo-1' FOR UPDATE`,
          { bind: [tenant], transaction: t, type: QueryTypes.SELECT },
        );
        locked = rows.length;
        if (locked === 0) await sleep(10);
      }
      expect(locked, 'the payment row, locked while the gateway is slow').to.equal(1);
      first = await answer;
    } finally {
      await t.rollback();
    }
    await slot.client.setFaults({});
    const [mark] = await db.sequelize.query<{ resumable: boolean }>(
      `SELECT resumable_since IS NOT NULL AS resumable FROM payments WHERE merchant_id = $1`,
      { bind: [tenant], type: QueryTypes.SELECT },
    );
    expect(mark.resumable, 'the mark was not written').to.equal(false);
    expect(first.status, first.text).to.equal(202);
    expect(first.headers.get('location')).to.match(/^\/api\/v1\/payments\/pay_/);
    expect(Number(first.headers.get('retry-after'))).to.be.greaterThan(0);
    const { final, statuses } = await payUntilFinal(instance.url, auth, key, body);
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
  });
});

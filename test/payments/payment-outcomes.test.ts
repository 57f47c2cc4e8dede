import { setTimeout as sleep } from 'node:timers/promises';
import { expect } from 'chai';
import { QueryTypes } from 'sequelize';
import { type GatewaySlot, startGatewaySlot } from '../support/gateway-slot.js';
import { http } from '../support/http.js';
import { createIsolatedDatabase, type IsolatedDatabase } from '../support/isolated-database.js';
import { createOrder } from '../support/orders.js';
import { pay, payUntilFinal, shortLeaseEnv, trpcClient } from '../support/payment-calls.js';
import { assertPaymentInvariants } from '../support/payment-invariants.js';
import { type Instance, startInstance } from '../support/processes.js';
import { bearer, idempotencyKey, uniqueTenant } from '../support/tokens.js';

describe('payments: every outcome of POST /payments (real instance, gateway on its own port)', function () {
  this.timeout(60000);
  let db: IsolatedDatabase;
  let slot: GatewaySlot;
  let instance: Instance;
  let base: string;

  before(async () => {
    db = await createIsolatedDatabase('outcomes');
    slot = await startGatewaySlot();
    instance = await startInstance(shortLeaseEnv(db.url, slot.url));
    base = instance.url;
  });
  beforeEach(async () => {
    if (slot.mode !== 'simulator') await slot.simulator();
    await slot.client.setFaults({});
  });
  after(async () => {
    await instance?.stop();
    await slot?.close();
    await db?.drop();
  });

  /** A tenant, a user of it and one order of that user to pay. */
  async function setup(amount = '25.00') {
    const tenant = uniqueTenant('pay');
    const auth = bearer(tenant, '810000001');
    const order = await createOrder(base, auth, 'mo-1', amount);
    return { tenant, auth, order, body: { merchantOrderNo: 'mo-1', amount } };
  }

  const metricsText = async () => (await fetch(`${base}/metrics`)).text();
  /** A sample's value from Prometheus text (name with its labels as printed), 0 when absent. */
  const metric = (text: string, sample: string) => {
    const line = text.split('\n').find((l) => l.startsWith(`${sample} `));
    return line ? Number(line.slice(sample.length + 1)) : 0;
  };

  const invariants = (tenant: string) =>
    assertPaymentInvariants(db.sequelize, () => slot.ledger(), tenant, { exclusiveLedger: true });

  async function paymentRow(tenant: string, merchantOrderNo: string) {
    const rows = await db.sequelize.query<{
      id: string;
      paymentNo: string;
      status: string;
      recordStatus: string;
    }>(
      `SELECT p.id, p.payment_no AS "paymentNo", p.status, r.status AS "recordStatus"
       FROM payments p JOIN idempotency_records r ON r.resource_id = p.id
       WHERE p.merchant_id = $1 AND p.merchant_order_no = $2`,
      { bind: [tenant, merchantOrderNo], type: QueryTypes.SELECT },
    );
    expect(rows, 'one payment with its record').to.have.length(1);
    return rows[0];
  }

  it('when the gateway charges, then 201 SUCCEEDED with Location, the order is PAID, one ledger charge', async () => {
    const { tenant, auth, order, body } = await setup();
    const res = await pay(base, auth, idempotencyKey(), body);
    expect(res.status, res.text).to.equal(201);
    expect(res.body.data).to.include({ status: 'SUCCEEDED', failureReason: null, amount: '25.00' });
    expect(res.headers.get('location')).to.equal(`/api/v1/payments/${res.body.data.id}`);
    const orderNow = await http('GET', `/api/v1/orders/${order.id}`, { baseUrl: base, headers: auth });
    expect(orderNow.body.data.status).to.equal('PAID');
    const charges = (await slot.ledger()).charges.filter((c) => c.paymentNo === res.body.data.paymentNo);
    expect(charges).to.have.length(1);
    await invariants(tenant);
  });

  it('when the gateway declines, then 201 FAILED "DECLINED", the order stays CREATED and a retry replays', async () => {
    const { tenant, auth, order, body } = await setup();
    await slot.client.setFaults({ declineRate: 1 });
    const key = idempotencyKey();
    const res = await pay(base, auth, key, body);
    expect(res.status, res.text).to.equal(201);
    expect(res.body.data).to.include({ status: 'FAILED', failureReason: 'DECLINED' });
    await slot.client.setFaults({});
    const again = await pay(base, auth, key, body);
    expect(again.status).to.equal(201);
    expect(again.body).to.deep.equal(res.body);
    expect(again.headers.get('idempotent-replayed')).to.equal('true');
    // Final: a new key for that order gets the same FAILED payment, never a second charge.
    const byNewKey = await pay(base, auth, idempotencyKey(), body);
    expect(byNewKey.status).to.equal(201);
    expect(byNewKey.body.data).to.deep.equal(res.body.data);
    expect(byNewKey.headers.get('idempotent-replayed')).to.equal('true');
    const orderNow = await http('GET', `/api/v1/orders/${order.id}`, { baseUrl: base, headers: auth });
    expect(orderNow.body.data.status).to.equal('CREATED');
    const [payment] = await invariants(tenant);
    expect(payment.status).to.equal('FAILED');
  });

  for (const [fault, what] of [
    ['timeoutAfterChargeRate', 'times out'],
    ['resetAfterChargeRate', 'resets the connection'],
  ] as const) {
    it(`when the gateway ${what} after charging, then the service queries it and answers 201 with one charge`, async () => {
      const { tenant, auth, body } = await setup();
      await slot.client.setFaults({ [fault]: 1 });
      const res = await pay(base, auth, idempotencyKey(), body);
      expect(res.status, res.text).to.equal(201);
      expect(res.body.data.status).to.equal('SUCCEEDED');
      const charges = (await slot.ledger()).charges.filter((c) => c.paymentNo === res.body.data.paymentNo);
      expect(charges).to.have.length(1);
      await invariants(tenant);
    });
  }

  it('when the outcome stays unknown after the query, then 202 with Location and Retry-After, and the payment becomes final later', async () => {
    const { tenant, auth, body } = await setup();
    await slot.blackHole();
    const key = idempotencyKey();
    const res = await pay(base, auth, key, body);
    expect(res.status, res.text).to.equal(202);
    expect(res.body.code).to.equal(202);
    expect(res.body.data.status).to.equal('PROCESSING');
    const paymentId = res.body.data.resourceId;
    expect(paymentId).to.be.a('string');
    expect(res.headers.get('location')).to.equal(`/api/v1/payments/${paymentId}`);
    expect(Number(res.headers.get('retry-after'))).to.be.greaterThan(0);
    expect(slot.blackHoleCharges()).to.be.greaterThan(0);
    const pending = await http('GET', res.headers.get('location')!, { baseUrl: base, headers: auth });
    expect(pending.body.data.status).to.equal('PROCESSING');
    // What an operator sees meanwhile: a PROCESSING record of some age.
    expect(metric(await metricsText(), 'idempotency_oldest_processing_age_seconds')).to.be.greaterThan(0);

    await slot.simulator();
    // Nobody retries: the recoverer takes the expired lease over, asks the gateway, then charges.
    let status = 'PROCESSING';
    for (let i = 0; i < 100 && status === 'PROCESSING'; i++) {
      await sleep(200);
      const got = await http('GET', `/api/v1/payments/${paymentId}`, { baseUrl: base, headers: auth });
      status = got.body.data.status;
    }
    expect(status).to.equal('SUCCEEDED');
    // ...and the recoverer's takeover, counted twice over: by the recoverer and as an engine outcome.
    const text = await metricsText();
    expect(metric(text, 'payment_recoverer_takeovers_total')).to.be.at.least(1);
    expect(
      metric(text, 'idempotency_outcomes_total{operation="payments.create",outcome="lease_takeover"}'),
    ).to.be.at.least(1);
    const retry = await payUntilFinal(base, auth, key, body);
    expect(retry.final.status).to.equal(201);
    expect(retry.final.body.data.id).to.equal(paymentId);
    const [payment] = await invariants(tenant);
    expect((await slot.ledger()).charges.filter((c) => c.paymentNo === payment.paymentNo)).to.have.length(1);
  });

  it('when the gateway refuses connections, then 503 with Retry-After, and a retry after its restart charges the same paymentNo', async () => {
    const { tenant, auth, body } = await setup();
    await slot.down();
    const key = idempotencyKey();
    const res = await pay(base, auth, key, body);
    expect(res.status, res.text).to.equal(503);
    expect(res.body.code).to.equal(503);
    expect(Number(res.headers.get('retry-after'))).to.be.greaterThan(0);
    const before = await paymentRow(tenant, 'mo-1');
    expect(before).to.include({ status: 'PROCESSING', recordStatus: 'FAILED_RETRYABLE' });

    await slot.simulator();
    const retry = await pay(base, auth, key, body);
    expect(retry.status, retry.text).to.equal(201);
    expect(retry.body.data).to.include({ id: before.id, paymentNo: before.paymentNo, status: 'SUCCEEDED' });
    const { charges } = await slot.ledger();
    expect(charges.map((c) => c.paymentNo)).to.deep.equal([before.paymentNo]);
    await invariants(tenant);
  });

  it('when the gateway answers 5xx, then 503 without a charge, and a retry with the same key charges once', async () => {
    const { tenant, auth, body } = await setup();
    await slot.client.setFaults({ errorRate: 1 });
    const key = idempotencyKey();
    const res = await pay(base, auth, key, body);
    expect(res.status, res.text).to.equal(503);
    expect(Number(res.headers.get('retry-after'))).to.be.greaterThan(0);
    const before = await paymentRow(tenant, 'mo-1');
    expect(before.recordStatus).to.equal('FAILED_RETRYABLE');
    expect((await slot.ledger()).charges.filter((c) => c.paymentNo === before.paymentNo)).to.deep.equal([]);
    await slot.client.setFaults({});
    const retry = await pay(base, auth, key, body);
    expect(retry.status, retry.text).to.equal(201);
    expect(retry.body.data).to.include({ paymentNo: before.paymentNo, status: 'SUCCEEDED' });
    await invariants(tenant);
  });

  it('when a paid merchantOrderNo comes with a new key, then the same amount replays the payment and another amount is 409 40902', async () => {
    const { tenant, auth, body } = await setup();
    const first = await pay(base, auth, idempotencyKey(), body);
    expect(first.status, first.text).to.equal(201);
    const same = await pay(base, auth, idempotencyKey(), { ...body, amount: 25 }, '/payments');
    expect(same.status).to.equal(201);
    expect(same.body).to.deep.equal(first.body);
    expect(same.headers.get('idempotent-replayed')).to.equal('true');
    const other = await pay(base, auth, idempotencyKey(), { ...body, amount: '26.00' });
    expect(other.status).to.equal(409);
    expect(other.body.code).to.equal(40902);
    const payments = await invariants(tenant);
    expect(payments).to.have.length(1);
  });

  it('when no order has the merchantOrderNo, then 404, replayed as a final failure with the same key', async () => {
    const tenant = uniqueTenant('pay');
    const auth = bearer(tenant, '810000002');
    const key = idempotencyKey();
    const body = { merchantOrderNo: 'missing', amount: '5.00' };
    const first = await pay(base, auth, key, body);
    expect(first.status).to.equal(404);
    // An order created meanwhile does not change a final answer: the stored 404 is replayed.
    await createOrder(base, auth, 'missing', '5.00');
    const again = await pay(base, auth, key, body);
    expect(again.status).to.equal(404);
    expect(again.body).to.deep.equal(first.body);
    expect(again.headers.get('idempotent-replayed')).to.equal('true');
    expect(await invariants(tenant)).to.deep.equal([]);
  });

  it("when a user pays another user's order, then 403 and nothing is charged", async () => {
    const { tenant, body } = await setup();
    const res = await pay(base, bearer(tenant, '810000099'), idempotencyKey(), body);
    expect(res.status).to.equal(403);
    expect(res.body.code).to.equal(403);
    expect(await invariants(tenant)).to.deep.equal([]);
  });

  it("when the amount differs from the order's, then 400 and nothing is charged", async () => {
    const { tenant, auth } = await setup('10.00');
    const res = await pay(base, auth, idempotencyKey(), { merchantOrderNo: 'mo-1', amount: '10.01' });
    expect(res.status).to.equal(400);
    expect(res.body.message).to.match(/^amount: /);
    expect(await invariants(tenant)).to.deep.equal([]);
  });

  it('when a payment is made over tRPC, then the result is the final payment and a retry with the same key replays it', async () => {
    const { tenant, auth, body } = await setup();
    const key = idempotencyKey();
    const { client, last } = trpcClient(base, { ...auth, 'Idempotency-Key': key });
    const first = (await client.payments.create.mutate(body)) as {
      code: number;
      data: { id: string; status: string };
    };
    // tRPC carries the REST payload; its own success status is 200 (the REST 201 is in the payload's meaning).
    expect(last.status).to.be.oneOf([200, 201]);
    expect(first.code).to.equal(200);
    expect(first.data.status).to.equal('SUCCEEDED');
    expect(last.headers.get('location')).to.equal(`/api/v1/payments/${first.data.id}`);
    const again = await client.payments.create.mutate(body);
    expect(again).to.deep.equal(first);
    expect(last.headers.get('idempotent-replayed')).to.equal('true');
    // The same key over REST is the same request.
    const rest = await pay(base, auth, key, body);
    expect(rest.status).to.equal(201);
    expect(rest.body).to.deep.equal(first);
    await invariants(tenant);
  });
});

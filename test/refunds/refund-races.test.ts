import { setTimeout as sleep } from 'node:timers/promises';
import { expect } from 'chai';
import { QueryTypes } from 'sequelize';
import { type GatewaySlot, startGatewaySlot } from '../support/gateway-slot.js';
import { type HttpResult, http } from '../support/http.js';
import { createIsolatedDatabase, type IsolatedDatabase } from '../support/isolated-database.js';
import { startInstancesInParallel } from '../support/parallel-instances.js';
import { shortLeaseEnv, untilFinal } from '../support/payment-calls.js';
import { type Instance, startInstance } from '../support/processes.js';
import { assertRefundInvariants, paidPayment, refund } from '../support/refunds.js';
import { bearer, idempotencyKey, uniqueTenant } from '../support/tokens.js';

// Generous bounds: the machine is loaded, and a lease that ends mid-request only adds a takeover.
const ENV = { IDEMPOTENCY_LEASE_MS: '3000', GATEWAY_TIMEOUT_MS: '1000', IDEMPOTENCY_MAX_IN_FLIGHT: '100' };

describe('refunds: races over 3 real instances, and a SIGKILL between the gateway refund and Tx 2', function () {
  this.timeout(120000);
  let db: IsolatedDatabase;
  let slot: GatewaySlot;
  let instances: Instance[];

  before(async () => {
    db = await createIsolatedDatabase('refraces');
    slot = await startGatewaySlot();
    instances = await startInstancesInParallel(3, shortLeaseEnv(db.url, slot.url, ENV));
  });
  after(async () => {
    for (const instance of instances ?? []) instance.kill();
    await Promise.all((instances ?? []).map((i) => i.exited));
    await slot?.close();
    await db?.drop();
  });

  const urls = () => instances.map((i) => i.url);
  const invariants = (tenant: string) =>
    assertRefundInvariants(db.sequelize, () => slot.ledger(), tenant, { settled: true });

  /** The client's half of the protocol: the same key again (on any instance) until the answer is final. */
  async function refundUntilFinal(
    auth: Record<string, string>,
    paymentId: string,
    key: string,
    body: Record<string, unknown>,
    first: number,
  ): Promise<HttpResult> {
    const send = (attempt: number) => refund(urls()[(first + attempt) % 3], auth, paymentId, key, body);
    const opts = { retryable: [0, 202, 503], deadlineMs: 60000, pauseMs: 200 };
    return (await untilFinal(send, `refund of ${paymentId}`, opts)).final;
  }

  it('when 30 refunds of 7.00 with distinct keys race for one payment of 100.00 on 3 instances, then exactly 14 succeed, the rest are 40906, and the ledger agrees', async () => {
    const tenant = uniqueTenant('race');
    const auth = bearer(tenant, '840000001');
    const payment = await paidPayment(urls()[0], auth, '100.00');
    const answers = await Promise.all(
      Array.from({ length: 30 }, (_, i) =>
        refundUntilFinal(auth, payment.id, idempotencyKey(), { amount: '7.00' }, i),
      ),
    );
    const statuses = answers.map((a) => (a.status === 201 ? a.body.data.status : a.body?.code));
    expect(
      statuses.filter((s) => s === 'SUCCEEDED'),
      statuses.join(','),
    ).to.have.length(14);
    expect(
      statuses.filter((s) => s === 40906),
      statuses.join(','),
    ).to.have.length(16);
    const now = await http('GET', `/api/v1/payments/${payment.id}`, { baseUrl: urls()[1], headers: auth });
    expect(now.body.data.amountRefunded).to.equal('98.00');
    const atGateway = (await slot.ledger()).refunds.filter((r) => r.paymentNo === payment.paymentNo);
    expect(atGateway.map((r) => r.status)).to.deep.equal(Array(14).fill('SUCCEEDED'));
    await invariants(tenant);
  });

  it('when 12 requests with the same key race on 3 instances, then there is one refund and every final answer is it', async () => {
    const tenant = uniqueTenant('race');
    const auth = bearer(tenant, '840000002');
    const payment = await paidPayment(urls()[0], auth, '30.00');
    const key = idempotencyKey();
    const answers = await Promise.all(
      Array.from({ length: 12 }, (_, i) => refundUntilFinal(auth, payment.id, key, { amount: '12.5' }, i)),
    );
    for (const a of answers) expect(a.status, a.text).to.equal(201);
    expect(new Set(answers.map((a) => a.body.data.id)).size).to.equal(1);
    const rows = await db.sequelize.query('SELECT id FROM refunds WHERE payment_id = $1', {
      bind: [payment.id],
      type: QueryTypes.SELECT,
    });
    expect(rows).to.have.length(1);
    const atGateway = (await slot.ledger()).refunds.filter((r) => r.paymentNo === payment.paymentNo);
    expect(atGateway).to.have.length(1);
    await invariants(tenant);
  });

  it('when the instance is SIGKILLed after the gateway refunded and before Tx 2, then the recoverer asks the gateway and finalises: refunded once', async () => {
    const victim = await startInstance(
      shortLeaseEnv(db.url, slot.url, { ...ENV, FAILPOINTS: 'refund.perform.after=sigkill@1' }),
    );
    instances.push(victim);
    const tenant = uniqueTenant('race');
    const auth = bearer(tenant, '840000003');
    const payment = await paidPayment(urls()[0], auth, '50.00');
    const key = idempotencyKey();
    const died = await refund(victim.url, auth, payment.id, key, { amount: '20' });
    expect(died.status, 'the victim must die before answering').to.equal(0);
    await victim.exited;
    const [row] = await db.sequelize.query<{ id: string; refundNo: string; status: string }>(
      `SELECT id, refund_no AS "refundNo", status FROM refunds WHERE payment_id = $1`,
      { bind: [payment.id], type: QueryTypes.SELECT },
    );
    expect(row.status).to.equal('PROCESSING');
    const made = (await slot.ledger()).refunds.filter((r) => r.refundNo === row.refundNo);
    expect(
      made.map((r) => r.status),
      'the gateway refunded before the kill',
    ).to.deep.equal(['SUCCEEDED']);
    // Nobody retries: a survivor's recoverer takes the expired lease over, queries, finalises.
    let status = 'PROCESSING';
    for (let i = 0; i < 300 && status === 'PROCESSING'; i++) {
      await sleep(200);
      const got = await http('GET', `/api/v1/refunds/${row.id}`, { baseUrl: urls()[0], headers: auth });
      status = got.body.data.status;
    }
    expect(status).to.equal('SUCCEEDED');
    const retry = await refund(urls()[1], auth, payment.id, key, { amount: '20' });
    expect(retry.status, retry.text).to.equal(201);
    expect(retry.body.data).to.include({ id: row.id, status: 'SUCCEEDED' });
    const now = await http('GET', `/api/v1/payments/${payment.id}`, { baseUrl: urls()[2], headers: auth });
    expect(now.body.data.amountRefunded).to.equal('20.00');
    expect((await slot.ledger()).refunds.filter((r) => r.refundNo === row.refundNo)).to.have.length(1);
    await invariants(tenant);
  });
});

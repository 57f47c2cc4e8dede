import { setTimeout as sleep } from 'node:timers/promises';
import { expect } from 'chai';
import { QueryTypes } from 'sequelize';
import { createGatewayClient } from '../../gateway/client.js';
import { type GatewaySlot, startGatewaySlot } from '../support/gateway-slot.js';
import { http } from '../support/http.js';
import { createIsolatedDatabase, type IsolatedDatabase } from '../support/isolated-database.js';
import { shortLeaseEnv } from '../support/payment-calls.js';
import { type Instance, startInstance } from '../support/processes.js';
import { reconcileCli } from '../support/reconcile-cli.js';
import { startRefundHole } from '../support/refund-hole.js';
import { assertRefundInvariants, paidPayment, refund } from '../support/refunds.js';
import { bearer, idempotencyKey, uniqueTenant } from '../support/tokens.js';

describe('refunds: every outcome of POST /payments/{id}/refunds (real instance, gateway on its own port)', function () {
  this.timeout(90000);
  let db: IsolatedDatabase;
  let slot: GatewaySlot;
  let hole: Awaited<ReturnType<typeof startRefundHole>>;
  let instance: Instance;
  let base: string;

  before(async () => {
    db = await createIsolatedDatabase('refunds');
    slot = await startGatewaySlot();
    hole = await startRefundHole(slot.url);
    instance = await startInstance(shortLeaseEnv(db.url, hole.url));
    base = instance.url;
  });
  beforeEach(async () => {
    hole.set(false);
    await slot.client.setFaults({});
  });
  after(async () => {
    await instance?.stop();
    await hole?.close();
    await slot?.close();
    await db?.drop();
  });

  async function setup(amount = '60.00') {
    const tenant = uniqueTenant('rfo');
    const auth = bearer(tenant, '830000001');
    const payment = await paidPayment(base, auth, amount);
    return { tenant, auth, payment };
  }
  const invariants = (tenant: string) =>
    assertRefundInvariants(db.sequelize, () => slot.ledger(), tenant, { settled: true });
  const get = (path: string, auth: Record<string, string>) =>
    http('GET', path, { baseUrl: base, headers: auth });
  const ledgerRefunds = async (refundNo: string) =>
    (await slot.ledger()).refunds.filter((r) => r.refundNo === refundNo);
  async function rowOf(id: string) {
    const [row] = await db.sequelize.query<{ status: string; resumable: boolean; recordStatus: string }>(
      `SELECT f.status, f.resumable_since IS NOT NULL AS resumable, r.status AS "recordStatus"
       FROM refunds f JOIN idempotency_records r ON r.resource_id = f.id WHERE f.id = $1`,
      { bind: [id], type: QueryTypes.SELECT },
    );
    return row;
  }
  const recovererRuns = async () => {
    const text = await (await fetch(`${base}/metrics`)).text();
    const line = text.split('\n').find((l) => l.startsWith('payment_recoverer_runs_total{result="ok"} '));
    return line ? Number(line.split(' ')[1]) : 0;
  };

  /** Until `n` more rounds of the recoverer have ended (each closes resumable refunds whose key expired). */
  async function recovererRounds(n: number) {
    const runs = await recovererRuns();
    while ((await recovererRuns()) < runs + n) await sleep(100);
  }
  /** A refund answered 503 because the gateway failed with 5xx: nothing refunded, resumable by its key. */
  async function notRefunded(auth: Record<string, string>, paymentId: string, key: string, amount: string) {
    await slot.client.setFaults({ errorRate: 1 });
    const res = await refund(base, auth, paymentId, key, { amount });
    expect(res.status, res.text).to.equal(503);
    await slot.client.setFaults({});
    const [row] = await db.sequelize.query<{ id: string; refundNo: string }>(
      `SELECT id, refund_no AS "refundNo" FROM refunds WHERE payment_id = $1 AND status = 'PROCESSING'`,
      { bind: [paymentId], type: QueryTypes.SELECT },
    );
    expect(await rowOf(row.id)).to.include({ status: 'PROCESSING', resumable: true });
    return row;
  }
  /** As if the key's TTL (PAYMENT_IDEMPOTENCY_TTL_HOURS, 168 h) had passed since the refund was made. */
  const expireKey = (id: string) =>
    db.sequelize.query(
      `WITH f AS (UPDATE refunds SET created_at = now() - interval '169 hours' WHERE id = $1 RETURNING id)
       UPDATE idempotency_records SET expires_at = now() - interval '1 minute'
       WHERE resource_id = (SELECT id FROM f)`,
      { bind: [id] },
    );

  it('when the gateway declines, then 201 FAILED "DECLINED", amountRefunded stays, and the amount is refundable again', async () => {
    const { tenant, auth, payment } = await setup('60.00');
    await slot.client.setFaults({ declineRate: 1 });
    const key = idempotencyKey();
    const declined = await refund(base, auth, payment.id, key, { amount: '60' });
    expect(declined.status, declined.text).to.equal(201);
    expect(declined.body.data).to.include({ status: 'FAILED', failureReason: 'DECLINED', amount: '60.00' });
    await slot.client.setFaults({});
    const replay = await refund(base, auth, payment.id, key, { amount: '60' });
    expect(replay.body).to.deep.equal(declined.body);
    expect(replay.headers.get('idempotent-replayed')).to.equal('true');
    expect((await get(`/api/v1/payments/${payment.id}`, auth)).body.data.amountRefunded).to.equal('0.00');
    const whole = await refund(base, auth, payment.id, idempotencyKey());
    expect(whole.status, whole.text).to.equal(201);
    expect(whole.body.data).to.include({ status: 'SUCCEEDED', amount: '60.00' });
    expect((await get(`/api/v1/payments/${payment.id}`, auth)).body.data.amountRefunded).to.equal('60.00');
    const events = await db.sequelize.query<{ type: string }>(
      'SELECT type FROM events WHERE resource_id IN ($1, $2) ORDER BY seq',
      { bind: [declined.body.data.id, whole.body.data.id], type: QueryTypes.SELECT },
    );
    expect(events.map((e) => e.type)).to.deep.equal(['refund.failed', 'refund.succeeded']);
    await invariants(tenant);
  });

  for (const [fault, what] of [
    ['timeoutAfterChargeRate', 'times out'],
    ['resetAfterChargeRate', 'resets the connection'],
  ] as const) {
    it(`when the gateway ${what} after refunding, then the service asks it (GET /refunds/{refundNo}) and answers 201 with one refund`, async () => {
      const { tenant, auth, payment } = await setup();
      await slot.client.setFaults({ [fault]: 1 });
      const res = await refund(base, auth, payment.id, idempotencyKey(), { amount: '10' });
      expect(res.status, res.text).to.equal(201);
      expect(res.body.data.status).to.equal('SUCCEEDED');
      expect(await ledgerRefunds(res.body.data.refundNo)).to.have.length(1);
      await invariants(tenant);
    });
  }

  it('when the outcome stays unknown after the query, then 202 with the refund as Location, and the recoverer makes it final', async () => {
    const { tenant, auth, payment } = await setup('60.00');
    hole.set(true);
    const key = idempotencyKey();
    const res = await refund(base, auth, payment.id, key, { amount: '45' });
    expect(res.status, res.text).to.equal(202);
    expect(res.body.data.status).to.equal('PROCESSING');
    const id = res.body.data.resourceId;
    expect(res.headers.get('location')).to.equal(`/api/v1/refunds/${id}`);
    expect(Number(res.headers.get('retry-after'))).to.be.greaterThan(0);
    expect(hole.swallowed()).to.be.greaterThan(0);
    // What an operator sees: the refund's call unknown, its query unavailable.
    const metrics = await (await fetch(`${base}/metrics`)).text();
    expect(metrics).to.match(/^payment_gateway_calls_total\{call="refund",result="unknown"\} [1-9]/m);
    expect(metrics).to.match(
      /^payment_gateway_calls_total\{call="refund-query",result="unavailable"\} [1-9]/m,
    );
    expect((await get(`/api/v1/refunds/${id}`, auth)).body.data.status).to.equal('PROCESSING');
    // PROCESSING counts towards the cap: 45 of 60 may be refunded already.
    const over = await refund(base, auth, payment.id, idempotencyKey(), { amount: '15.01' });
    expect([over.status, over.body.code]).to.deep.equal([409, 40906]);

    hole.set(false);
    // Nobody retries: the recoverer takes the expired lease over, asks the gateway, then refunds.
    let status = 'PROCESSING';
    for (let i = 0; i < 150 && status === 'PROCESSING'; i++) {
      await sleep(200);
      status = (await get(`/api/v1/refunds/${id}`, auth)).body.data.status;
    }
    expect(status).to.equal('SUCCEEDED');
    const retry = await refund(base, auth, payment.id, key, { amount: '45' });
    expect(retry.status, retry.text).to.equal(201);
    expect(retry.body.data).to.include({ id, status: 'SUCCEEDED' });
    expect((await get(`/api/v1/payments/${payment.id}`, auth)).body.data.amountRefunded).to.equal('45.00');
    expect(await ledgerRefunds(retry.body.data.refundNo)).to.have.length(1);
    await invariants(tenant);
  });

  it('when the gateway answers 5xx, then 503 with Retry-After, the recoverer leaves it alone, and a retry with the same key refunds once with the same refundNo', async () => {
    const { tenant, auth, payment } = await setup('60.00');
    await slot.client.setFaults({ errorRate: 1 });
    const key = idempotencyKey();
    const res = await refund(base, auth, payment.id, key, { amount: '20' });
    expect(res.status, res.text).to.equal(503);
    expect(res.body.code).to.equal(503);
    expect(Number(res.headers.get('retry-after'))).to.be.greaterThan(0);
    const [row] = await db.sequelize.query<{ id: string; refundNo: string }>(
      `SELECT id, refund_no AS "refundNo" FROM refunds WHERE payment_id = $1`,
      { bind: [payment.id], type: QueryTypes.SELECT },
    );
    expect(await rowOf(row.id)).to.deep.equal({
      status: 'PROCESSING',
      resumable: true,
      recordStatus: 'FAILED_RETRYABLE',
    });
    // Faults off: a recoverer that performed resumable refunds on its own would refund it now.
    await slot.client.setFaults({});
    const runs = await recovererRuns();
    while ((await recovererRuns()) < runs + 3) await sleep(100);
    expect(await ledgerRefunds(row.refundNo)).to.deep.equal([]);
    expect((await rowOf(row.id)).resumable).to.equal(true);
    // The operator sees it: every effect's resumable resources are a gauge of their own.
    const metrics = await (await fetch(`${base}/metrics`)).text();
    const gauge = (name: string) =>
      Number(new RegExp(`^${name}\\{effect="refunds.create"\\} (\\S+)$`, 'm').exec(metrics)?.[1]);
    expect(gauge('effects_resumable')).to.be.at.least(1);
    expect(gauge('effects_resumable_oldest_age_seconds')).to.be.at.least(0);

    const retry = await refund(base, auth, payment.id, key, { amount: '20' });
    expect(retry.status, retry.text).to.equal(201);
    expect(retry.body.data).to.include({ id: row.id, refundNo: row.refundNo, status: 'SUCCEEDED' });
    expect(await ledgerRefunds(row.refundNo)).to.have.length(1);
    expect(await rowOf(row.id)).to.deep.equal({
      status: 'SUCCEEDED',
      resumable: false,
      recordStatus: 'SUCCEEDED',
    });
    await invariants(tenant);
  });

  it('when a resumable refund\'s key has expired, then the recoverer asks the gateway first and closes it: FAILED "KEY_EXPIRED", refund.failed, its amount refundable again, the key refused (40905)', async () => {
    const { tenant, auth, payment } = await setup('60.00');
    const key = idempotencyKey();
    const row = await notRefunded(auth, payment.id, key, '20');
    // Resumable, it holds its 20 against the payment's cap.
    const over = await refund(base, auth, payment.id, idempotencyKey(), { amount: '40.01' });
    expect([over.status, over.body.code]).to.deep.equal([409, 40906]);

    // The gateway's query cannot answer: nothing is closed blind.
    hole.set(true);
    await expireKey(row.id);
    await recovererRounds(3);
    expect(await rowOf(row.id)).to.include({ status: 'PROCESSING', resumable: true });

    hole.set(false);
    let closed = (await get(`/api/v1/refunds/${row.id}`, auth)).body.data;
    for (let i = 0; i < 150 && closed.status === 'PROCESSING'; i++) {
      await sleep(200);
      closed = (await get(`/api/v1/refunds/${row.id}`, auth)).body.data;
    }
    expect(closed).to.include({ status: 'FAILED', failureReason: 'KEY_EXPIRED', amount: '20.00' });
    expect(await rowOf(row.id)).to.include({ status: 'FAILED', resumable: false });
    expect(await ledgerRefunds(row.refundNo), 'never refunded by the recoverer').to.deep.equal([]);
    const events = await db.sequelize.query<{ type: string }>(
      'SELECT type FROM events WHERE resource_id = $1 ORDER BY seq',
      { bind: [row.id], type: QueryTypes.SELECT },
    );
    expect(events.map((e) => e.type)).to.deep.equal(['refund.failed']);
    const metrics = await (await fetch(`${base}/metrics`)).text();
    expect(metrics).to.match(
      /^idempotency_outcomes_total\{operation="refunds.create",outcome="closed_key_expired"\} [1-9]/m,
    );

    const retry = await refund(base, auth, payment.id, key, { amount: '20' });
    expect([retry.status, retry.body.code], retry.text).to.deep.equal([409, 40905]);
    expect(await ledgerRefunds(row.refundNo)).to.deep.equal([]);
    expect((await get(`/api/v1/payments/${payment.id}`, auth)).body.data.amountRefunded).to.equal('0.00');
    const whole = await refund(base, auth, payment.id, idempotencyKey());
    expect(whole.status, whole.text).to.equal(201);
    expect(whole.body.data).to.include({ status: 'SUCCEEDED', amount: '60.00' });
    await invariants(tenant);
  });

  it("when a resumable refund's key has expired but the gateway refunded it after all, then the recoverer leaves it PROCESSING and reconcile --repair records the refund", async () => {
    const { tenant, auth, payment } = await setup('60.00');
    const row = await notRefunded(auth, payment.id, idempotencyKey(), '20');
    // A gateway that answered 5xx and refunded anyway, against its contract.
    const [charge] = await db.sequelize.query<{ paymentNo: string; chargeId: string; currency: string }>(
      `SELECT payment_no AS "paymentNo", charge_id AS "chargeId", currency FROM payments WHERE id = $1`,
      { bind: [payment.id], type: QueryTypes.SELECT },
    );
    const gateway = createGatewayClient({ baseUrl: slot.url, timeoutMs: 5000 });
    try {
      await gateway.refund({ refundNo: row.refundNo, ...charge, amount: '20.00' });
    } finally {
      await gateway.close();
    }
    expect(await ledgerRefunds(row.refundNo)).to.have.length(1);

    await expireKey(row.id);
    await recovererRounds(3);
    expect(await rowOf(row.id), 'not closed as FAILED: the gateway refunded it').to.include({
      status: 'PROCESSING',
      resumable: true,
    });
    const run = await reconcileCli(db.url, slot.url, ['--json', '--merchant', tenant, '--repair']);
    expect(run.stdout, run.stderr).to.include('refund-processing-but-refunded');
    expect((await get(`/api/v1/refunds/${row.id}`, auth)).body.data).to.include({ status: 'SUCCEEDED' });
    expect((await get(`/api/v1/payments/${payment.id}`, auth)).body.data.amountRefunded).to.equal('20.00');
    await invariants(tenant);
  });

  it("when a retry with the key races the closure (the key past the TTL by the refund's clock, not yet by its record's), then one of them wins: refunded once, or closed and replayed, never both", async () => {
    const { tenant, auth, payment } = await setup('60.00');
    const key = idempotencyKey();
    const row = await notRefunded(auth, payment.id, key, '20');
    // A slow gateway widens the window between the closure's query and its statement.
    await slot.client.setFaults({ latencyMs: 150 });
    await db.sequelize.query("UPDATE refunds SET created_at = now() - interval '169 hours' WHERE id = $1", {
      bind: [row.id],
    });
    const retry = await refund(base, auth, payment.id, key, { amount: '20' });
    await slot.client.setFaults({});
    expect(retry.status, retry.text).to.equal(201);
    const { status } = retry.body.data;
    if (status === 'SUCCEEDED') {
      expect(await ledgerRefunds(row.refundNo)).to.have.length(1);
      expect((await get(`/api/v1/payments/${payment.id}`, auth)).body.data.amountRefunded).to.equal('20.00');
    } else {
      expect(retry.body.data).to.include({ status: 'FAILED', failureReason: 'KEY_EXPIRED' });
      expect(retry.headers.get('idempotent-replayed')).to.equal('true');
      expect(await ledgerRefunds(row.refundNo)).to.deep.equal([]);
    }
    await recovererRounds(2);
    expect((await get(`/api/v1/refunds/${row.id}`, auth)).body.data.status).to.equal(status);
    await invariants(tenant);
  });

  it("when the refund was closed by its clock while its key's record still lives (a TTL lowered since), then a retry with the key gets the closed refund, replayed, and nothing is refunded", async () => {
    const { tenant, auth, payment } = await setup('60.00');
    const key = idempotencyKey();
    const row = await notRefunded(auth, payment.id, key, '20');
    await db.sequelize.query("UPDATE refunds SET created_at = now() - interval '169 hours' WHERE id = $1", {
      bind: [row.id],
    });
    let status = 'PROCESSING';
    for (let i = 0; i < 150 && status === 'PROCESSING'; i++) {
      await sleep(100);
      status = (await get(`/api/v1/refunds/${row.id}`, auth)).body.data.status;
    }
    expect(status).to.equal('FAILED');
    const retry = await refund(base, auth, payment.id, key, { amount: '20' });
    expect(retry.status, retry.text).to.equal(201);
    expect(retry.body.data).to.include({ id: row.id, status: 'FAILED', failureReason: 'KEY_EXPIRED' });
    expect(retry.headers.get('idempotent-replayed')).to.equal('true');
    expect(await ledgerRefunds(row.refundNo)).to.deep.equal([]);
    await invariants(tenant);
  });
});

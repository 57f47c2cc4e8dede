import { setTimeout as sleep } from 'node:timers/promises';
import { expect } from 'chai';
import { QueryTypes } from 'sequelize';
import { setFailpoints } from '../../core/failpoints.js';
import { parseEventRow, renderEventData } from '../../events/render.js';
import { http } from '../support/http.js';
import { assertRefundInvariants, paidPayment, refund } from '../support/refunds.js';
import { sharedServer } from '../support/server.js';
import { bearer, idempotencyKey, uniqueTenant } from '../support/tokens.js';
import { trpcMutation, trpcQuery } from '../support/trpc-http.js';

describe('refunds: the API (in-process gateway simulator)', function () {
  this.timeout(30000);
  const owner = '820000001';
  const ledger = async () => (await sharedServer()).services.payments.gateway.ledger();
  const invariants = async (tenant: string) =>
    assertRefundInvariants((await sharedServer()).services.sequelize, ledger, tenant, { settled: true });

  it('when a payment is refunded in part, then 201 SUCCEEDED with Location, amountRefunded grows, one gateway refund, and a retry replays', async () => {
    const tenant = uniqueTenant('rf');
    const auth = bearer(tenant, owner);
    const payment = await paidPayment(undefined, auth, '100.00');
    expect(payment.amountRefunded).to.equal('0.00');
    const key = idempotencyKey();
    const res = await refund(undefined, auth, payment.id, key, {
      amount: 30,
      reason: 'damaged',
      traceId: 't1',
    });
    expect(res.status, res.text).to.equal(201);
    expect(res.body.data).to.include({
      paymentId: payment.id,
      amount: '30.00',
      currency: 'USD',
      reason: 'damaged',
      status: 'SUCCEEDED',
      failureReason: null,
    });
    expect(res.body.data.refundNo).to.be.a('string');
    expect(res.headers.get('location')).to.equal(`/api/v1/refunds/${res.body.data.id}`);
    const again = await refund(undefined, auth, payment.id, key, {
      amount: '30.00',
      reason: 'damaged',
      traceId: 't2',
    });
    expect(again.status).to.equal(201);
    expect(again.body).to.deep.equal(res.body);
    expect(again.headers.get('idempotent-replayed')).to.equal('true');
    const paymentNow = await http('GET', `/api/v1/payments/${payment.id}`, { headers: auth });
    expect(paymentNow.body.data.amountRefunded).to.equal('30.00');
    // A new key for the paid order replays the payment as it stands now.
    const byNewKey = await http('POST', '/api/v1/payments', {
      headers: { ...auth, 'Idempotency-Key': idempotencyKey() },
      body: { merchantOrderNo: paymentNow.body.data.merchantOrderNo, amount: '100.00' },
    });
    expect(byNewKey.status, byNewKey.text).to.equal(201);
    expect(byNewKey.body.data).to.deep.equal(paymentNow.body.data);
    const got = await http('GET', res.headers.get('location')!, { headers: auth });
    expect(got.status).to.equal(200);
    expect(got.body.data).to.deep.equal(res.body.data);
    const made = (await ledger()).refunds.filter((r) => r.refundNo === res.body.data.refundNo);
    expect(made).to.have.length(1);
    expect(made[0]).to.include({ paymentNo: payment.paymentNo, amount: '30.00', status: 'SUCCEEDED' });
    await invariants(tenant);
  });

  it('when no amount is given, then what is left is refunded, and a further refund is 409 40906', async () => {
    const tenant = uniqueTenant('rf');
    const auth = bearer(tenant, owner);
    const payment = await paidPayment(undefined, auth, '50.00');
    const first = await refund(undefined, auth, payment.id, idempotencyKey(), { amount: '20' });
    expect(first.status, first.text).to.equal(201);
    const rest = await refund(undefined, auth, payment.id, idempotencyKey());
    expect(rest.status, rest.text).to.equal(201);
    expect(rest.body.data).to.include({ amount: '30.00', status: 'SUCCEEDED', reason: null });
    for (const body of [{}, { amount: '0.01' }]) {
      const over = await refund(undefined, auth, payment.id, idempotencyKey(), body);
      expect(over.status, over.text).to.equal(409);
      expect(over.body.code).to.equal(40906);
      expect(over.body.data).to.equal(null);
    }
    const list = await http('GET', `/api/v1/payments/${payment.id}/refunds`, { headers: auth });
    expect(list.status).to.equal(200);
    expect(list.body.data.map((r: { id: string }) => r.id)).to.deep.equal([
      first.body.data.id,
      rest.body.data.id,
    ]);
    const paymentNow = await http('GET', `/api/v1/payments/${payment.id}`, { headers: auth });
    expect(paymentNow.body.data.amountRefunded).to.equal('50.00');
    await invariants(tenant);
  });

  it('when the amount is more than what is left, then 409 40906 and the refusal is replayed to its key', async () => {
    const tenant = uniqueTenant('rf');
    const auth = bearer(tenant, owner);
    const payment = await paidPayment(undefined, auth, '10.00');
    const key = idempotencyKey();
    const over = await refund(undefined, auth, payment.id, key, { amount: '10.01' });
    expect(over.status, over.text).to.equal(409);
    expect(over.body.code).to.equal(40906);
    const again = await refund(undefined, auth, payment.id, key, { amount: '10.01' });
    expect(again.status).to.equal(409);
    expect(again.body).to.deep.equal(over.body);
    expect(again.headers.get('idempotent-replayed')).to.equal('true');
    // The same key with another amount is another request: 40901 naming the field.
    const mismatch = await refund(undefined, auth, payment.id, key, { amount: '5' });
    expect(mismatch.status).to.equal(409);
    expect(mismatch.body).to.deep.include({ code: 40901, data: { mismatch: ['/amount'] } });
    expect((await ledger()).refunds.filter((r) => r.paymentNo === payment.paymentNo)).to.deep.equal([]);
  });

  it('when the same key and body go to another payment, then 409 40901 naming only /id, and nothing is refunded there', async () => {
    const tenant = uniqueTenant('rf');
    const auth = bearer(tenant, owner);
    const [first, second] = [
      await paidPayment(undefined, auth, '10.00'),
      await paidPayment(undefined, auth, '10.00'),
    ];
    const key = idempotencyKey();
    const body = { amount: '5', reason: 'damaged' };
    expect((await refund(undefined, auth, first.id, key, body)).status).to.equal(201);
    const other = await refund(undefined, auth, second.id, key, body);
    expect(other.status, other.text).to.equal(409);
    expect(other.body).to.deep.include({ code: 40901, data: { mismatch: ['/id'] } });
    expect((await ledger()).refunds.filter((r) => r.paymentNo === second.paymentNo)).to.deep.equal([]);
  });

  it('when the checks fail, then 404 (no payment, another tenant), 403 (another user), 40903 (not SUCCEEDED), in that order', async () => {
    const tenant = uniqueTenant('rf');
    const auth = bearer(tenant, owner);
    const payment = await paidPayment(undefined, auth, '10.00');
    const none = await refund(undefined, auth, 'pay_nonexistent', idempotencyKey(), { amount: 1 });
    expect([none.status, none.body.code]).to.deep.equal([404, 404]);
    // An id with a NUL or a quote travels as an escaped literal in the claim's round trip: no such payment.
    for (const id of ['pay\u0000x', "pay'x"]) {
      const odd = await refund(undefined, auth, id, idempotencyKey(), { amount: 1 });
      expect([odd.status, odd.body.code], odd.text).to.deep.equal([404, 404]);
    }
    const otherTenant = await refund(
      undefined,
      bearer(uniqueTenant('rf'), owner, 'admin'),
      payment.id,
      idempotencyKey(),
    );
    expect([otherTenant.status, otherTenant.body.code]).to.deep.equal([404, 404]);
    const otherUser = bearer(tenant, '820000002');
    const forbidden = await refund(undefined, otherUser, payment.id, idempotencyKey(), { amount: 1 });
    expect([forbidden.status, forbidden.body.code]).to.deep.equal([403, 403]);
    // Forbidden before "over": an amount that is also too much is still a 403.
    const both = await refund(undefined, otherUser, payment.id, idempotencyKey(), { amount: 1000 });
    expect(both.status).to.equal(403);
    for (const path of [`/api/v1/payments/${payment.id}/refunds`]) {
      const list = await http('GET', path, { headers: otherUser });
      expect(list.status).to.equal(403);
    }
    // An admin of the tenant may refund; the refund belongs to the payment's owner.
    const admin = bearer(tenant, '820000003', 'admin');
    const byAdmin = await refund(undefined, admin, payment.id, idempotencyKey(), { amount: 1 });
    expect(byAdmin.status, byAdmin.text).to.equal(201);
    const ownerReads = await http('GET', `/api/v1/refunds/${byAdmin.body.data.id}`, { headers: auth });
    expect(ownerReads.status).to.equal(200);
    expect(
      (await http('GET', `/api/v1/refunds/${byAdmin.body.data.id}`, { headers: otherUser })).status,
    ).to.equal(403);
    expect(
      (
        await http('GET', `/api/v1/refunds/${byAdmin.body.data.id}`, {
          headers: bearer(uniqueTenant(), owner),
        })
      ).status,
    ).to.equal(404);
    // A payment that is not SUCCEEDED: FAILED by hand (the decline path is tested with a real gateway).
    const failed = await paidPayment(undefined, auth, '10.00');
    const { sequelize } = (await sharedServer()).services;
    await sequelize.query(`UPDATE payments SET status = 'FAILED' WHERE id = $1`, { bind: [failed.id] });
    const notPaid = await refund(undefined, auth, failed.id, idempotencyKey(), { amount: 1000 });
    expect([notPaid.status, notPaid.body.code]).to.deep.equal([409, 40903]);
    await invariants(tenant);
  });

  it("when a refund's Tx 1 stalls holding the payment's row lock, then another refund of that payment gets 503 with Retry-After (bounded wait, never a hang or a 500), and its retry refunds", async () => {
    const tenant = uniqueTenant('rf');
    const auth = bearer(tenant, owner);
    const payment = await paidPayment(undefined, auth, '30.00');
    const { sequelize } = (await sharedServer()).services;
    setFailpoints('refund.tx1.before-commit=stall(4000)@1');
    try {
      const first = refund(undefined, auth, payment.id, idempotencyKey(), { amount: '10' });
      const locked = `SELECT 1 FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
                      WHERE c.relname = 'payments' AND l.mode = 'RowShareLock' AND l.pid <> pg_backend_pid()`;
      while ((await sequelize.query(locked, { type: QueryTypes.SELECT })).length === 0) await sleep(20);
      const key = idempotencyKey();
      const blocked = await refund(undefined, auth, payment.id, key, { amount: '10' });
      expect(blocked.status, blocked.text).to.equal(503);
      expect(Number(blocked.headers.get('retry-after'))).to.be.greaterThan(0);
      expect((await first).status).to.equal(201);
      const retry = await refund(undefined, auth, payment.id, key, { amount: '10' });
      expect(retry.status, retry.text).to.equal(201);
    } finally {
      setFailpoints('');
    }
    await invariants(tenant);
  });

  it('when the input is bad, then 400 in the envelope and nothing is refunded', async () => {
    const tenant = uniqueTenant('rf');
    const auth = bearer(tenant, owner);
    const payment = await paidPayment(undefined, auth, '10.00');
    const bad: Array<[Record<string, unknown>, string]> = [
      [{ amount: '1.234' }, 'amount'],
      [{ amount: -1 }, 'amount'],
      [{ amount: 0 }, 'amount'],
      [{ amount: 'ten' }, 'amount'],
      [{ reason: 'x'.repeat(201) }, 'reason'],
      [{ reason: 5 }, 'reason'],
      [{ amount: 1, currency: 'EUR' }, 'currency'],
      [{ paymentId: payment.id }, 'paymentId'],
      // The path's parameter in the body is refused, never silently overwritten by the path.
      [{ id: 'pay_other', amount: 1 }, 'id'],
    ];
    for (const [body, field] of bad) {
      const res = await refund(undefined, auth, payment.id, idempotencyKey(), body);
      expect(res.status, `${JSON.stringify(body)}: ${res.text}`).to.equal(400);
      expect(res.body.code).to.equal(400);
      expect(res.body.message).to.include(field);
      expect(res.text).to.not.match(/at .*\.ts:\d+/);
    }
    const noKey = await http('POST', `/api/v1/payments/${payment.id}/refunds`, { headers: auth, body: {} });
    expect(noKey.status).to.equal(400);
    const reason200 = await refund(undefined, auth, payment.id, idempotencyKey(), {
      amount: 1,
      reason: 'x'.repeat(200),
    });
    expect(reason200.status, reason200.text).to.equal(201);
    const made = (await ledger()).refunds.filter((r) => r.paymentNo === payment.paymentNo);
    expect(made).to.have.length(1);
  });

  it('when refunds are created and read over tRPC, then the payload equals the REST answer and the payment event renders amountRefunded', async () => {
    const tenant = uniqueTenant('rf');
    const auth = bearer(tenant, owner);
    const payment = await paidPayment(undefined, auth, '40.00');
    const key = idempotencyKey();
    const viaTrpc = await trpcMutation(
      'refunds.create',
      { id: payment.id, amount: '15' },
      { ...auth, 'Idempotency-Key': key },
    );
    expect(viaTrpc.status, viaTrpc.text).to.equal(200);
    const created = viaTrpc.body.result.data;
    expect(created.data).to.include({ amount: '15.00', status: 'SUCCEEDED' });
    // The same key over REST is the same request: replayed.
    const viaRest = await refund(undefined, auth, payment.id, key, { amount: 15 });
    expect(viaRest.status).to.equal(201);
    expect(viaRest.headers.get('idempotent-replayed')).to.equal('true');
    expect(viaRest.body).to.deep.equal(created);
    const got = await trpcQuery('refunds.get', { id: created.data.id }, auth);
    expect(got.body.result.data.data).to.deep.equal(created.data);
    const list = await trpcQuery('refunds.list', { id: payment.id }, auth);
    expect(list.body.result.data.data).to.deep.equal([created.data]);
    const over = await trpcMutation(
      'refunds.create',
      { id: payment.id, amount: '25.01' },
      { ...auth, 'Idempotency-Key': idempotencyKey() },
    );
    expect(over.status).to.equal(409);
    expect(over.body.error.data.businessCode).to.equal(40906);
    // The events: refund.succeeded with the Refund transfer object.
    const { sequelize } = (await sharedServer()).services;
    const events = await sequelize.query<{ type: string; row: string }>(
      `SELECT type, row::text AS row FROM events WHERE tenant_id = $1 AND resource_id IN ($2, $3) ORDER BY seq`,
      { bind: [tenant, created.data.id, payment.id], type: QueryTypes.SELECT },
    );
    expect(events.map((e) => e.type)).to.deep.equal(['payment.succeeded', 'refund.succeeded']);
    expect(renderEventData(events[0].type, parseEventRow(events[0].row))).to.include({
      id: payment.id,
      amountRefunded: '0.00',
    });
    expect(renderEventData(events[1].type, parseEventRow(events[1].row))).to.deep.equal(created.data);
  });

  it('when one payment is refunded three times with three keys, then three refunds are listed oldest first', async () => {
    const tenant = uniqueTenant('rf');
    const auth = bearer(tenant, owner);
    const payment = await paidPayment(undefined, auth, '30.00');
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      const res = await refund(undefined, auth, payment.id, idempotencyKey(), { amount: '10' });
      expect(res.status, res.text).to.equal(201);
      ids.push(res.body.data.id);
    }
    const list = await http('GET', `/api/v1/payments/${payment.id}/refunds`, { headers: auth });
    expect(list.body.data.map((r: { id: string }) => r.id)).to.deep.equal(ids);
    await invariants(tenant);
  });
});

import { expect } from 'chai';
import { http } from '../support/http.js';
import { createOrder } from '../support/orders.js';
import { bearer, idempotencyKey, uniqueTenant } from '../support/tokens.js';

describe('payments: basic outcomes (in-process gateway simulator)', () => {
  it('when an order is paid, then 201 SUCCEEDED, order PAID, and a retry replays the same payment', async () => {
    const tenant = uniqueTenant();
    const auth = bearer(tenant, '800000001');
    const order = await createOrder(undefined, auth, 'mo-1');
    const headers = { ...auth, 'Idempotency-Key': idempotencyKey() };
    const first = await http('POST', '/api/v1/payments', {
      headers,
      body: { merchantOrderNo: 'mo-1', amount: 25 },
    });
    expect(first.status, first.text).to.equal(201);
    expect(first.body.data.status).to.equal('SUCCEEDED');
    expect(first.headers.get('location')).to.equal(`/api/v1/payments/${first.body.data.id}`);
    const again = await http('POST', '/payments', {
      headers,
      body: { merchantOrderNo: 'mo-1', amount: '25.00' },
    });
    expect(again.status).to.equal(201);
    expect(again.body).to.deep.equal(first.body);
    expect(again.headers.get('idempotent-replayed')).to.equal('true');
    const byNewKey = await http('POST', '/api/v1/payments', {
      headers: { ...auth, 'Idempotency-Key': idempotencyKey() },
      body: { merchantOrderNo: 'mo-1', amount: '25.0' },
    });
    expect(byNewKey.status).to.equal(201);
    expect(byNewKey.body.data.id).to.equal(first.body.data.id);
    expect(byNewKey.headers.get('idempotent-replayed')).to.equal('true');
    const conflict = await http('POST', '/api/v1/payments', {
      headers: { ...auth, 'Idempotency-Key': idempotencyKey() },
      body: { merchantOrderNo: 'mo-1', amount: '26.00' },
    });
    expect(conflict.status).to.equal(409);
    expect(conflict.body.code).to.equal(40902);
    const orderNow = await http('GET', `/api/v1/orders/${order.id}`, { headers: auth });
    expect(orderNow.body.data.status).to.equal('PAID');
    const got = await http('GET', `/api/v1/payments/${first.body.data.id}`, { headers: auth });
    expect(got.body.data).to.deep.equal(first.body.data);
  });

  it('when no order exists, then 404, replayed as a final failure', async () => {
    const auth = bearer(uniqueTenant(), '800000002');
    const headers = { ...auth, 'Idempotency-Key': idempotencyKey() };
    const first = await http('POST', '/api/v1/payments', {
      headers,
      body: { merchantOrderNo: 'none', amount: 1 },
    });
    expect(first.status).to.equal(404);
    const again = await http('POST', '/api/v1/payments', {
      headers,
      body: { merchantOrderNo: 'none', amount: 1 },
    });
    expect(again.status).to.equal(404);
    expect(again.headers.get('idempotent-replayed')).to.equal('true');
  });

  it('when the amount differs from the order, then 400', async () => {
    const auth = bearer(uniqueTenant(), '800000003');
    await createOrder(undefined, auth, 'mo-x', '10.00');
    const res = await http('POST', '/api/v1/payments', {
      headers: { ...auth, 'Idempotency-Key': idempotencyKey() },
      body: { merchantOrderNo: 'mo-x', amount: 11 },
    });
    expect(res.status).to.equal(400);
    expect(res.body.message).to.match(/^amount: /);
  });

  it('when the amount matches but the currency differs from the order, then 400 naming currency', async () => {
    const auth = bearer(uniqueTenant(), '800000004');
    await createOrder(undefined, auth, 'mo-c', '10.00');
    const res = await http('POST', '/api/v1/payments', {
      headers: { ...auth, 'Idempotency-Key': idempotencyKey() },
      body: { merchantOrderNo: 'mo-c', amount: '10.00', currency: 'EUR' },
    });
    expect(res.status, res.text).to.equal(400);
    expect(res.body.message).to.match(/^currency: /);
  });
});

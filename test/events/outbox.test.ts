import { expect } from 'chai';
import { readFeed, START } from '../../events/feed.js';
import { http } from '../support/http.js';
import { createOrder, orderInOpenTransaction } from '../support/orders.js';
import { sharedServer } from '../support/server.js';
import { bearer, idempotencyKey, uniqueTenant } from '../support/tokens.js';

async function tenantEvents(tenantId: string) {
  const { sequelize } = (await sharedServer()).services;
  return readFeed(sequelize, { tenantId, after: START, limit: 100 });
}

describe('events: the transactional outbox', () => {
  it('when an order is created and paid, then order.created, payment.succeeded and order.paid, once each, with the answers as data', async () => {
    const tenant = uniqueTenant();
    const auth = bearer(tenant, '810000001');
    const order = await createOrder(undefined, auth, 'mo-1');
    const headers = { ...auth, 'Idempotency-Key': idempotencyKey() };
    const paid = await http('POST', '/api/v1/payments', {
      headers,
      body: { merchantOrderNo: 'mo-1', amount: 25 },
    });
    expect(paid.status, paid.text).to.equal(201);
    const replay = await http('POST', '/api/v1/payments', {
      headers,
      body: { merchantOrderNo: 'mo-1', amount: 25 },
    });
    expect(replay.headers.get('idempotent-replayed')).to.equal('true');
    const events = await tenantEvents(tenant);
    expect(events.map((e) => e.event.type).sort()).to.deep.equal([
      'order.created',
      'order.paid',
      'payment.succeeded',
    ]);
    const created = events.find((e) => e.event.type === 'order.created');
    expect(created?.event.data).to.deep.equal(order);
    const succeeded = events.find((e) => e.event.type === 'payment.succeeded');
    const payment = await http('GET', `/api/v1/payments/${paid.body.data.id}`, { headers: auth });
    expect(succeeded?.event.data).to.deep.equal(payment.body.data);
    const orderNow = await http('GET', `/api/v1/orders/${order.id}`, { headers: auth });
    expect(events.find((e) => e.event.type === 'order.paid')?.event.data).to.deep.equal(orderNow.body.data);
    for (const e of events) expect(e.event.id).to.match(/^evt_\d+_\d+$/);
  });

  it('when a change rolls back, then it wrote no event', async () => {
    const tenant = uniqueTenant();
    const { client } = await orderInOpenTransaction(tenant, '1', 'rolled-back');
    try {
      const inside = await client.query('SELECT count(*)::int AS n FROM events WHERE tenant_id = $1', [
        tenant,
      ]);
      expect(inside.rows[0].n).to.equal(1);
      await client.query('ROLLBACK');
    } finally {
      await client.end();
    }
    expect(await tenantEvents(tenant)).to.deep.equal([]);
  });

  it('when an older transaction is still open, then the feed shows nothing after its position until it ends (the out-of-order commit trap)', async () => {
    const tenant = uniqueTenant();
    const { client: slow } = await orderInOpenTransaction(tenant, '1', 'slow');
    try {
      const auth = bearer(tenant, '810000002');
      await createOrder(undefined, auth, 'fast');
      expect(await tenantEvents(tenant), 'the later commit waits behind the open transaction').to.deep.equal(
        [],
      );
      await slow.query('COMMIT');
    } finally {
      await slow.end();
    }
    const events = await tenantEvents(tenant);
    expect(events.map((e) => (e.event.data as { merchantOrderNo: string }).merchantOrderNo)).to.deep.equal([
      'slow',
      'fast',
    ]);
  });
});

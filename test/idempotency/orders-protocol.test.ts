import { expect } from 'chai';
import { http } from '../support/http.js';
import { sharedServer } from '../support/server.js';
import { bearer, idempotencyKey, uniqueTenant } from '../support/tokens.js';
import { adminOf } from '../support/users.js';
import {
  type Answer,
  createdStatus,
  createOrderVia,
  expectFailure,
  orderScope,
  ordersOf,
  recordsOf,
  sql,
  TRANSPORTS,
  viaTrpc,
} from './support.js';

const USER = '810000001';

function expectReplayed(a: Answer): void {
  expect(a.headers.get('idempotent-replayed'), `status ${a.status}`).to.equal('true');
}

function expectNotReplayed(a: Answer): void {
  expect(a.headers.get('idempotent-replayed')).to.equal(null);
}

/** Mode A never commits a PROCESSING row: after any answer, none exists for the tenant. */
async function expectNoProcessing(tenant: string): Promise<void> {
  const rows = (await recordsOf(tenant)).filter((r) => r.status === 'PROCESSING');
  expect(rows, 'PROCESSING records left behind').to.deep.equal([]);
}

for (const transport of TRANSPORTS) {
  describe(`idempotency protocol on orders.create over ${transport} (CONTRACT section 5, Mode A)`, () => {
    it('when a new key creates an order, then it executes once: one order, one SUCCEEDED record, no replay marker', async () => {
      const tenant = uniqueTenant();
      const key = idempotencyKey();
      const a = await createOrderVia({
        transport,
        headers: { ...bearer(tenant, USER), 'Idempotency-Key': key },
        body: { merchantOrderNo: 'mo-new', amount: 10 },
      });
      expect(a.status, JSON.stringify(a.body)).to.equal(createdStatus(transport));
      expect(a.body.code).to.equal(200);
      const order = a.body.data;
      expect(order.amount).to.equal('10.00');
      expect(a.headers.get('location')).to.equal(`/api/v1/orders/${order.id}`);
      expectNotReplayed(a);

      const orders = await ordersOf(tenant);
      expect(orders.map((o) => o.id)).to.deep.equal([order.id]);
      const records = await recordsOf(tenant);
      expect(records).to.have.length(1);
      expect(records[0].scope_key).to.equal(orderScope(tenant, USER, key));
      expect(records[0].status).to.equal('SUCCEEDED');
      expect(records[0].http_status).to.equal(201);
      expect(records[0].resource_id).to.equal(order.id);
      expect(records[0].request_hash).to.match(/^[0-9a-f]{64}$/);
    });

    it('when the same key and an equivalent body come again, then the original answer with Idempotent-Replayed and still one order', async () => {
      const tenant = uniqueTenant();
      const headers = { ...bearer(tenant, USER), 'Idempotency-Key': idempotencyKey() };
      const first = await createOrderVia({
        transport,
        headers,
        body: { merchantOrderNo: 'mo-rep', amount: 10, description: 'first', traceId: 'a' },
      });
      expect(first.status).to.equal(createdStatus(transport));
      // Same request after normalisation: other amount spelling, default currency written out,
      // keys reordered, another traceId (not business).
      const again = await createOrderVia({
        transport,
        headers,
        body: {
          traceId: 'b',
          description: 'first',
          currency: 'USD',
          amount: '10.00',
          merchantOrderNo: 'mo-rep',
        },
      });
      expect(again.status).to.equal(first.status);
      expect(again.body).to.deep.equal(first.body);
      expect(again.headers.get('location')).to.equal(first.headers.get('location'));
      expectReplayed(again);
      expect(await ordersOf(tenant)).to.have.length(1);
      expect(await recordsOf(tenant)).to.have.length(1);
    });

    it('when the same key comes with a different body, then 409/40901, the first result is never returned, nothing changes', async () => {
      const tenant = uniqueTenant();
      const headers = { ...bearer(tenant, USER), 'Idempotency-Key': idempotencyKey() };
      const first = await createOrderVia({
        transport,
        headers,
        body: { merchantOrderNo: 'mo-fp', amount: 10 },
      });
      expect(first.status).to.equal(createdStatus(transport));
      const before = await recordsOf(tenant);
      for (const body of [
        { merchantOrderNo: 'mo-fp', amount: 11 },
        { merchantOrderNo: 'mo-fp', amount: 10, currency: 'EUR' },
        { merchantOrderNo: 'mo-fp', amount: 10, description: 'x' },
        { merchantOrderNo: 'mo-other', amount: 10 },
      ]) {
        const other = await createOrderVia({ transport, headers, body });
        expectFailure(other, 409, 40901);
        expect(other.headers.get('location')).to.equal(null);
        expectNotReplayed(other);
      }
      expect((await ordersOf(tenant)).map((o) => o.id)).to.deep.equal([first.body.data.id]);
      expect(await recordsOf(tenant)).to.deep.equal(before);
    });

    it('when a new key hits a taken merchantOrderNo (409/40904), then that key replays the 409 even after the clash is gone', async () => {
      const tenant = uniqueTenant();
      const auth = bearer(tenant, USER);
      const body = { merchantOrderNo: 'mo-dup', amount: 5 };
      const first = await createOrderVia({
        transport,
        headers: { ...auth, 'Idempotency-Key': idempotencyKey() },
        body,
      });
      expect(first.status).to.equal(createdStatus(transport));
      const key = idempotencyKey();
      const clash = await createOrderVia({ transport, headers: { ...auth, 'Idempotency-Key': key }, body });
      expectFailure(clash, 409, 40904);
      expectNotReplayed(clash);
      const [record] = (await recordsOf(tenant)).filter((r) => r.scope_key === orderScope(tenant, USER, key));
      expect(record.status).to.equal('FAILED_FINAL');
      expect(record.http_status).to.equal(409);

      // Remove the clashing order behind the service's back: a re-execution would now succeed,
      // so only a replay of the stored failure can still answer 409.
      await sql('DELETE FROM orders WHERE tenant_id = $1', [tenant]);
      const again = await createOrderVia({ transport, headers: { ...auth, 'Idempotency-Key': key }, body });
      expect(again.status).to.equal(409);
      expect(again.body).to.deep.equal(clash.body);
      expectReplayed(again);
      expect(await ordersOf(tenant)).to.deep.equal([]);
      await expectNoProcessing(tenant);
    });

    it('when a request is missing the Idempotency-Key, then 400 naming the header, no order and no record', async () => {
      const tenant = uniqueTenant();
      const a = await createOrderVia({
        transport,
        headers: bearer(tenant, USER),
        body: { merchantOrderNo: 'm', amount: 1 },
      });
      expectFailure(a, 400);
      expect(a.body.message).to.match(/^Idempotency-Key: /);
      expect(await ordersOf(tenant)).to.deep.equal([]);
      expect(await recordsOf(tenant)).to.deep.equal([]);
    });

    it('when the Idempotency-Key is malformed (15 or 65 chars, bad characters), then 400, no order and no record', async () => {
      const tenant = uniqueTenant();
      for (const key of [
        'a'.repeat(15),
        'a'.repeat(65),
        'abcdefghijklmnop:',
        'abcdefgh ijklmnop',
        'abcdefghijklmnop.',
      ]) {
        const a = await createOrderVia({
          transport,
          headers: { ...bearer(tenant, USER), 'Idempotency-Key': key },
          body: { merchantOrderNo: 'm', amount: 1 },
        });
        expectFailure(a, 400);
        expect(a.body.message, key).to.match(/^Idempotency-Key: /);
      }
      expect(await ordersOf(tenant)).to.deep.equal([]);
      expect(await recordsOf(tenant)).to.deep.equal([]);
    });

    it('when answers of every kind have been given, then no PROCESSING record is left for the tenant', async () => {
      const tenant = uniqueTenant();
      const auth = bearer(tenant, USER);
      const key = idempotencyKey();
      const answers = [
        await createOrderVia({
          transport,
          headers: { ...auth, 'Idempotency-Key': key },
          body: { merchantOrderNo: 'p', amount: 1 },
        }),
        await createOrderVia({
          transport,
          headers: { ...auth, 'Idempotency-Key': key },
          body: { merchantOrderNo: 'p', amount: 1 },
        }),
        await createOrderVia({
          transport,
          headers: { ...auth, 'Idempotency-Key': key },
          body: { merchantOrderNo: 'p', amount: 2 },
        }),
        await createOrderVia({
          transport,
          headers: { ...auth, 'Idempotency-Key': idempotencyKey() },
          body: { merchantOrderNo: 'p', amount: 1 },
        }),
      ];
      expect(answers.map((a) => a.status)).to.deep.equal([
        createdStatus(transport),
        createdStatus(transport),
        409,
        409,
      ]);
      const records = await recordsOf(tenant);
      expect(records.map((r) => r.status).sort()).to.deep.equal(['FAILED_FINAL', 'SUCCEEDED']);
      await expectNoProcessing(tenant);
    });
  });
}

describe('idempotency protocol across transports and aliases', () => {
  it('when one key goes over REST, then tRPC, then the alias /orders, then it is one request: one order, two replays', async () => {
    const tenant = uniqueTenant();
    const headers = { ...bearer(tenant, USER), 'Idempotency-Key': idempotencyKey() };
    const body = { merchantOrderNo: 'mo-x', amount: '7.5' };
    const rest = await createOrderVia({ transport: 'rest', headers, body });
    const trpc = await createOrderVia({ transport: 'trpc', headers, body: { ...body, amount: 7.5 } });
    // The alias, with a charset parameter on the media type: the same fingerprint.
    const alias = await createOrderVia({
      transport: 'rest',
      headers: { ...headers, 'Content-Type': 'application/json; charset=utf-8' },
      body,
      path: '/orders',
    });
    expect(rest.status).to.equal(201);
    expectNotReplayed(rest);
    expect(trpc.status).to.equal(200);
    expect(trpc.body).to.deep.equal(rest.body);
    expect(trpc.headers.get('location')).to.equal(rest.headers.get('location'));
    expectReplayed(trpc);
    expect(alias.status).to.equal(201);
    expect(alias.body).to.deep.equal(rest.body);
    expect(alias.headers.get('location')).to.equal(rest.headers.get('location'));
    expectReplayed(alias);
    expect(await ordersOf(tenant)).to.have.length(1);
    expect(await recordsOf(tenant)).to.have.length(1);
  });

  it('when one key goes over tRPC first, then REST replays it with the original 201 and Location', async () => {
    const tenant = uniqueTenant();
    const headers = { ...bearer(tenant, USER), 'Idempotency-Key': idempotencyKey() };
    const body = { merchantOrderNo: 'mo-y', amount: 3 };
    const trpc = await createOrderVia({ transport: 'trpc', headers, body });
    const rest = await createOrderVia({ transport: 'rest', headers, body, path: '/orders' });
    expect(trpc.status).to.equal(200);
    expectNotReplayed(trpc);
    expect(rest.status).to.equal(201);
    expect(rest.body).to.deep.equal(trpc.body);
    expect(rest.headers.get('location')).to.equal(`/api/v1/orders/${trpc.body.data.id}`);
    expectReplayed(rest);
    expect(await ordersOf(tenant)).to.have.length(1);
  });

  it('when one key goes to the alias with another body, then 409/40901 as on the canonical path', async () => {
    const tenant = uniqueTenant();
    const headers = { ...bearer(tenant, USER), 'Idempotency-Key': idempotencyKey() };
    await createOrderVia({
      transport: 'rest',
      headers,
      body: { merchantOrderNo: 'mo-z', amount: 3 },
      path: '/orders',
    });
    const other = await createOrderVia({
      transport: 'trpc',
      headers,
      body: { merchantOrderNo: 'mo-z', amount: 4 },
    });
    expectFailure(other, 409, 40901);
    expect(await ordersOf(tenant)).to.have.length(1);
  });
});

describe('idempotency protocol under concurrency', () => {
  it('when 20 requests race on one key with two different bodies, then one order; the same body gets its 201, the other body 409/40901', async () => {
    const tenant = uniqueTenant();
    const headers = { ...bearer(tenant, USER), 'Idempotency-Key': idempotencyKey() };
    const bodies = [
      { merchantOrderNo: 'mo-race', amount: 1 },
      { merchantOrderNo: 'mo-race', amount: 2 },
    ];
    const answers = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        createOrderVia({ transport: i % 4 < 2 ? 'rest' : 'trpc', headers, body: bodies[i % 2] }),
      ),
    );
    const orders = await ordersOf(tenant);
    expect(orders).to.have.length(1);
    const winner = orders[0].amount === '1.00' ? 0 : 1;
    for (const [i, a] of answers.entries()) {
      // Still processing after the wait bound (the fingerprint cannot be compared yet): allowed.
      if (a.body.code === 202) continue;
      if (i % 2 === winner) {
        expect(a.body.code, JSON.stringify(a.body)).to.equal(200);
        expect(a.body.data.id).to.equal(orders[0].id);
      } else {
        expectFailure(a, 409, 40901);
      }
    }
    await expectNoProcessing(tenant);
  });
});

describe('idempotency scope: tenant + user + operation + key', () => {
  it('when other users, tenants and operations reuse one key, then each executes on its own record', async () => {
    const tenant = uniqueTenant();
    const otherTenant = uniqueTenant();
    const key = idempotencyKey();
    const body = { merchantOrderNo: 'mo-s', amount: 1 };
    const a = await createOrderVia({
      transport: 'rest',
      headers: { ...bearer(tenant, USER), 'Idempotency-Key': key },
      body,
    });
    // Another user of the tenant, same key: its own record, so it executes (and meets the
    // tenant-wide merchantOrderNo rule) instead of replaying user 1's order.
    const b = await createOrderVia({
      transport: 'rest',
      headers: { ...bearer(tenant, '810000002'), 'Idempotency-Key': key },
      body: { merchantOrderNo: 'mo-s2', amount: 1 },
    });
    const c = await createOrderVia({
      transport: 'trpc',
      headers: { ...bearer(otherTenant, USER), 'Idempotency-Key': key },
      body,
    });
    // One user (the tenant's operator admin), one key, two operations: two records.
    const d = await http('POST', '/api/v1/users', {
      headers: { ...adminOf(tenant), 'Idempotency-Key': key },
      body: { name: 'Same Key', age: 20 },
    });
    const e = await createOrderVia({
      transport: 'rest',
      headers: { ...adminOf(tenant), 'Idempotency-Key': key },
      body: { merchantOrderNo: 'mo-admin', amount: 1 },
    });
    for (const x of [a, b, d, e]) {
      expect(x.status, JSON.stringify(x.body)).to.equal(201);
      expectNotReplayed(x);
    }
    expect(c.status).to.equal(200);
    expectNotReplayed(c);
    expect(new Set([a.body.data.id, b.body.data.id, c.body.data.id]).size).to.equal(3);

    const orders = await ordersOf(tenant);
    expect(orders.map((o) => [o.user_id, o.merchant_order_no])).to.deep.equal([
      [USER, 'mo-s'],
      ['810000002', 'mo-s2'],
      ['900000001', 'mo-admin'],
    ]);
    expect(await ordersOf(otherTenant)).to.have.length(1);
    const scopes = [...(await recordsOf(tenant)), ...(await recordsOf(otherTenant))].map((r) => r.scope_key);
    expect(scopes.sort()).to.deep.equal(
      [
        orderScope(tenant, USER, key),
        orderScope(tenant, '810000002', key),
        orderScope(otherTenant, USER, key),
        `${tenant}:900000001:users.create:${key}`,
        orderScope(tenant, '900000001', key),
      ].sort(),
    );
  });

  it('when another user sends the same key and the same body, then it executes (409/40904 from the order rule), never a replay of the first', async () => {
    const tenant = uniqueTenant();
    const key = idempotencyKey();
    const body = { merchantOrderNo: 'mo-t', amount: 1 };
    const first = await createOrderVia({
      transport: 'rest',
      headers: { ...bearer(tenant, USER), 'Idempotency-Key': key },
      body,
    });
    const second = await createOrderVia({
      transport: 'rest',
      headers: { ...bearer(tenant, '810000003'), 'Idempotency-Key': key },
      body,
    });
    expect(first.status).to.equal(201);
    expectFailure(second, 409, 40904);
    expectNotReplayed(second);
    expect(await ordersOf(tenant)).to.have.length(1);
  });
});

describe('Idempotency-Key on reads', () => {
  it('when a GET carries a key (valid or malformed), then it is ignored: 200, no replay marker, no record', async () => {
    const tenant = uniqueTenant();
    const auth = bearer(tenant, USER);
    const created = await createOrderVia({
      transport: 'rest',
      headers: { ...auth, 'Idempotency-Key': idempotencyKey() },
      body: { merchantOrderNo: 'mo-g', amount: 1 },
    });
    const id = created.body.data.id;
    const before = await recordsOf(tenant);
    for (const key of [idempotencyKey(), 'bad key!']) {
      const one = await http('GET', `/api/v1/orders/${id}`, { headers: { ...auth, 'Idempotency-Key': key } });
      const list = await http('GET', '/api/v1/orders', { headers: { ...auth, 'Idempotency-Key': key } });
      const trpc = await viaTrpc((await sharedServer()).url, { ...auth, 'Idempotency-Key': key }, (c) =>
        c.orders.get.query({ id }),
      );
      for (const a of [one, list, trpc]) {
        expect(a.status).to.equal(200);
        expectNotReplayed(a);
      }
      expect(one.body.data).to.deep.equal(created.body.data);
      expect(list.body.data).to.deep.equal([created.body.data]);
      expect(trpc.body.data).to.deep.equal(created.body.data);
    }
    expect(await recordsOf(tenant)).to.deep.equal(before);
  });
});

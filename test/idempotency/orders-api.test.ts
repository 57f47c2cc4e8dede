import { expect } from 'chai';
import { http } from '../support/http.js';
import { sharedServer } from '../support/server.js';
import { bearer, idempotencyKey, uniqueTenant } from '../support/tokens.js';
import { adminOf, createUser, expectSuccess } from '../support/users.js';
import { expectFailure, ordersOf, viaTrpc } from './support.js';

const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/;

async function newOrder(
  tenant: string,
  user: string,
  body: Record<string, unknown>,
  path = '/api/v1/orders',
) {
  return http('POST', path, {
    headers: { ...bearer(tenant, user), 'Idempotency-Key': idempotencyKey() },
    body,
  });
}

describe('orders: POST /api/v1/orders (CONTRACT section 3)', () => {
  it('when an order is created with amount 10 and no currency or description, then 201, Location, "10.00", USD, description null, CREATED', async () => {
    const tenant = uniqueTenant();
    const res = await newOrder(tenant, '860000001', { merchantOrderNo: 'mo_1-A', amount: 10 });
    const order = expectSuccess(res, 201);
    expect(order).to.have.all.keys(
      'id',
      'merchantOrderNo',
      'userId',
      'amount',
      'currency',
      'description',
      'status',
      'createdAt',
      'updatedAt',
    );
    expect(order.id).to.match(/^[1-9][0-9]*$/);
    expect(order).to.include({
      merchantOrderNo: 'mo_1-A',
      userId: '860000001',
      amount: '10.00',
      currency: 'USD',
      description: null,
      status: 'CREATED',
    });
    expect(order.createdAt).to.match(ISO);
    expect(order.updatedAt).to.match(ISO);
    expect(res.headers.get('location')).to.equal(`/api/v1/orders/${order.id}`);
    const [row] = await ordersOf(tenant);
    expect(row).to.deep.equal({
      id: order.id,
      user_id: '860000001',
      merchant_order_no: 'mo_1-A',
      amount: '10.00',
      currency: 'USD',
      description: null,
      status: 'CREATED',
    });
  });

  it('when an order is created on the alias with currency, description and a fractional amount, then they are kept and rendered with two decimals', async () => {
    const tenant = uniqueTenant();
    const res = await newOrder(
      tenant,
      '860000001',
      { merchantOrderNo: 'mo-2', amount: 0.5, currency: 'EUR', description: 'Blue mug', traceId: 'trace-1' },
      '/orders',
    );
    const order = expectSuccess(res, 201);
    expect(order).to.include({ amount: '0.50', currency: 'EUR', description: 'Blue mug' });
    expect(order).to.not.have.property('traceId');
    expect(res.headers.get('location')).to.equal(`/api/v1/orders/${order.id}`);
    expect((await ordersOf(tenant)).map((o) => [o.amount, o.currency, o.description])).to.deep.equal([
      ['0.50', 'EUR', 'Blue mug'],
    ]);
  });

  it('when the body breaks a field rule, then 400 naming the field and no order', async () => {
    const tenant = uniqueTenant();
    const cases: Array<[Record<string, unknown>, RegExp]> = [
      [{ merchantOrderNo: 'mo', amount: 0 }, /^amount: /],
      [{ merchantOrderNo: 'mo', amount: '10.001' }, /^amount: /],
      [{ merchantOrderNo: 'mo', amount: 0.1 + 0.2 }, /^amount: /],
      [{ merchantOrderNo: 'mo', amount: '1234567890123' }, /^amount: /],
      [{ merchantOrderNo: 'mo no', amount: 1 }, /^merchantOrderNo: /],
      [{ merchantOrderNo: 'm'.repeat(65), amount: 1 }, /^merchantOrderNo: /],
      [{ merchantOrderNo: 'mo', amount: 1, currency: 'usd' }, /^currency: /],
      [{ merchantOrderNo: 'mo', amount: 1, description: 'd'.repeat(201) }, /^description: /],
      // PostgreSQL text cannot hold NUL (it was stored as the two characters \0): refused.
      [{ merchantOrderNo: 'mo', amount: 1, description: 'a\u0000b' }, /^description: must not contain NUL/],
      [{ merchantOrderNo: 'mo', amount: 1, status: 'PAID' }, /status/],
      [{ amount: 1 }, /^merchantOrderNo: /],
    ];
    for (const [body, message] of cases) {
      const res = await newOrder(tenant, '860000001', body);
      expectFailure(res, 400);
      expect(res.body.message, JSON.stringify(body)).to.match(message);
    }
    expect(await ordersOf(tenant)).to.deep.equal([]);
  });

  it('when the amount string has whitespace around it, then 400 in the envelope with the amount rule, as "+10.00" and "10,00" are, and no order', async () => {
    const tenant = uniqueTenant();
    for (const amount of [' 10.00', '10.00 ', '\t10', '10.00\n', '+10.00', '10,00']) {
      const res = await newOrder(tenant, '860000001', { merchantOrderNo: 'mo-ws', amount });
      expectFailure(res, 400);
      expect(res.body.message, JSON.stringify(amount)).to.equal(
        'amount: must be a positive decimal with at most 12 integer and 2 fraction digits',
      );
    }
    expect(await ordersOf(tenant)).to.deep.equal([]);
  });

  it('when the largest amount 123456789012.99 is sent as a number, then it is stored and rendered exactly', async () => {
    const tenant = uniqueTenant();
    const order = expectSuccess(
      await newOrder(tenant, '860000001', { merchantOrderNo: 'big', amount: 123456789012.99 }),
      201,
    );
    expect(order.amount).to.equal('123456789012.99');
    expect((await ordersOf(tenant))[0].amount).to.equal('123456789012.99');
  });

  it('when a second key uses a taken merchantOrderNo of the tenant, then 409/40904; another tenant may use it', async () => {
    const tenant = uniqueTenant();
    expectSuccess(await newOrder(tenant, '860000001', { merchantOrderNo: 'shared-no', amount: 1 }), 201);
    expectFailure(
      await newOrder(tenant, '860000002', { merchantOrderNo: 'shared-no', amount: 1 }),
      409,
      40904,
    );
    const otherTenant = uniqueTenant();
    expectSuccess(await newOrder(otherTenant, '860000001', { merchantOrderNo: 'shared-no', amount: 1 }), 201);
    expect(await ordersOf(tenant)).to.have.length(1);
    expect(await ordersOf(otherTenant)).to.have.length(1);
  });
});

describe('orders: GET /api/v1/orders/{id}', () => {
  it('when the owner, an admin, another user and another tenant read an order, then 200, 200, 403 and 404', async () => {
    const tenant = uniqueTenant();
    const owner = await createUser(tenant, { name: 'Owner' });
    const created = expectSuccess(
      await newOrder(tenant, owner.id, { merchantOrderNo: 'mine', amount: 3 }),
      201,
    );
    const path = `/api/v1/orders/${created.id}`;

    expect(expectSuccess(await http('GET', path, { headers: bearer(tenant, owner.id) }))).to.deep.equal(
      created,
    );
    expect(
      expectSuccess(await http('GET', `/orders/${created.id}`, { headers: bearer(tenant, owner.id) })),
    ).to.deep.equal(created);
    expect(expectSuccess(await http('GET', path, { headers: adminOf(tenant) }))).to.deep.equal(created);
    const adminUser = await createUser(tenant, { name: 'Admin', role: 'admin' });
    expect(
      expectSuccess(await http('GET', path, { headers: bearer(tenant, adminUser.id, 'admin') })),
    ).to.deep.equal(created);

    expectFailure(await http('GET', path, { headers: bearer(tenant, '860000099') }), 403);
    const stranger = uniqueTenant();
    expectFailure(await http('GET', path, { headers: bearer(stranger, owner.id) }), 404);
    expectFailure(await http('GET', path, { headers: adminOf(stranger) }), 404);
  });

  it('when an order is read over tRPC, then the same payload and the same 403/404 statuses', async () => {
    const tenant = uniqueTenant();
    const created = expectSuccess(
      await newOrder(tenant, '860000001', { merchantOrderNo: 'rpc', amount: 3 }),
      201,
    );
    const { url } = await sharedServer();
    const mine = await viaTrpc(url, bearer(tenant, '860000001'), (c) =>
      c.orders.get.query({ id: created.id }),
    );
    expect(mine.status).to.equal(200);
    expect(mine.body).to.deep.equal({ code: 200, message: 'Success', data: created });
    expectFailure(
      await viaTrpc(url, bearer(tenant, '860000002'), (c) => c.orders.get.query({ id: created.id })),
      403,
    );
    expectFailure(
      await viaTrpc(url, adminOf(uniqueTenant()), (c) => c.orders.get.query({ id: created.id })),
      404,
    );
    expectFailure(
      await viaTrpc(url, bearer(tenant, '860000001'), (c) => c.orders.get.query({ id: 'abc' })),
      400,
    );
  });

  it('when the id does not exist or is not a positive 64-bit integer, then 404 or 400', async () => {
    const tenant = uniqueTenant();
    const headers = bearer(tenant, '860000001');
    expectFailure(await http('GET', '/api/v1/orders/9223372036854775807', { headers }), 404);
    for (const bad of ['abc', '0', '-1', '1.5', '9223372036854775808', '01']) {
      const res = await http('GET', `/api/v1/orders/${bad}`, { headers });
      expectFailure(res, 400);
      expect(res.body.message, bad).to.match(/^id: /);
    }
  });

  it('when no token is sent, then 401 before anything else', async () => {
    expectFailure(await http('GET', '/api/v1/orders/abc'), 401);
    expectFailure(await http('POST', '/api/v1/orders', { body: { merchantOrderNo: 'x', amount: 1 } }), 401);
  });
});

describe('orders: GET /api/v1/orders (list)', () => {
  it('when an admin lists, then every order of the tenant; a user sees only its own; another tenant sees none of them', async () => {
    const tenant = uniqueTenant();
    const a = expectSuccess(await newOrder(tenant, '860000001', { merchantOrderNo: 'a1', amount: 1 }), 201);
    const b = expectSuccess(await newOrder(tenant, '860000002', { merchantOrderNo: 'b1', amount: 2 }), 201);
    const a2 = expectSuccess(await newOrder(tenant, '860000001', { merchantOrderNo: 'a2', amount: 3 }), 201);

    expect(expectSuccess(await http('GET', '/api/v1/orders', { headers: adminOf(tenant) }))).to.deep.equal([
      a,
      b,
      a2,
    ]);
    expect(
      expectSuccess(await http('GET', '/api/v1/orders', { headers: bearer(tenant, '860000001') })),
    ).to.deep.equal([a, a2]);
    expect(
      expectSuccess(await http('GET', '/api/v1/orders', { headers: bearer(tenant, '860000002') })),
    ).to.deep.equal([b]);
    expect(
      expectSuccess(await http('GET', '/api/v1/orders', { headers: bearer(tenant, '860000003') })),
    ).to.deep.equal([]);
    expect(
      expectSuccess(await http('GET', '/api/v1/orders', { headers: adminOf(uniqueTenant()) })),
    ).to.deep.equal([]);

    const viaRpc = await viaTrpc((await sharedServer()).url, bearer(tenant, '860000001'), (c) =>
      c.orders.list.query({ page: 1, size: 10 }),
    );
    expect(viaRpc.body.data).to.deep.equal([a, a2]);
  });

  it('when page and size are given, then that slice in id order; bad values are 400; unknown query parameters ignored', async () => {
    const tenant = uniqueTenant();
    const ids: string[] = [];
    for (const i of [1, 2, 3, 4, 5]) {
      ids.push(
        expectSuccess(await newOrder(tenant, '860000001', { merchantOrderNo: `p${i}`, amount: i }), 201).id,
      );
    }
    const headers = bearer(tenant, '860000001');
    const page = async (q: string) =>
      (expectSuccess(await http('GET', `/api/v1/orders${q}`, { headers })) as Array<{ id: string }>).map(
        (o) => o.id,
      );
    expect(await page('?page=1&size=2')).to.deep.equal(ids.slice(0, 2));
    expect(await page('?page=2&size=2')).to.deep.equal(ids.slice(2, 4));
    expect(await page('?page=3&size=2')).to.deep.equal(ids.slice(4));
    expect(await page('?page=4&size=2')).to.deep.equal([]);
    expect(await page('')).to.deep.equal(ids);
    expect(await page('?size=100&foo=bar')).to.deep.equal(ids);
    for (const q of ['?page=0', '?size=0', '?size=101', '?page=abc', '?size=1.5']) {
      expectFailure(await http('GET', `/api/v1/orders${q}`, { headers }), 400);
    }
  });
});

import { expect } from 'chai';
import { sqlRows } from '../../core/sql.js';
import type { ResponseCipher } from '../../idempotency/response-cipher.js';
import { openReply } from '../../idempotency/stored-reply.js';
import { http } from '../support/http.js';
import { createOrder } from '../support/orders.js';
import { callerFor, sharedServer } from '../support/server.js';
import { bearer, idempotencyKey, uniqueTenant } from '../support/tokens.js';
import { trpcMutation } from '../support/trpc-http.js';
import { Receiver, retireEndpoints, until } from './receiver.js';

const PATH = '/api/v1/webhook-endpoints';

async function createEndpoint(admin: Record<string, string>, body: object, key?: string) {
  return http('POST', PATH, { headers: { ...admin, ...(key ? { 'Idempotency-Key': key } : {}) }, body });
}

async function deliveriesOf(admin: Record<string, string>, id: string, query = '') {
  const res = await http('GET', `${PATH}/${id}/deliveries${query}`, { headers: admin });
  expect(res.status, res.text).to.equal(200);
  return res.body.data as Array<Record<string, unknown>>;
}

describe('webhooks: endpoints API', function () {
  this.timeout(120_000);
  const receiver = new Receiver();

  before(async () => {
    await sharedServer();
    await receiver.start();
  });
  after(async () => {
    await receiver.stop();
    await retireEndpoints(receiver.port);
  });

  it('when an admin creates an endpoint, then 201 with Location and a whsec_ secret once; get and list never show it', async () => {
    const admin = bearer(uniqueTenant(), '1', 'admin');
    const res = await createEndpoint(admin, { url: 'https://example.com/hooks' });
    expect(res.status, res.text).to.equal(201);
    const endpoint = res.body.data;
    expect(endpoint).to.include({ url: 'https://example.com/hooks', status: 'ENABLED', types: null });
    expect(endpoint.secret).to.match(/^whsec_[A-Za-z0-9+/]+=*$/);
    expect(Buffer.from(endpoint.secret.slice(6), 'base64').length).to.equal(32);
    expect(res.headers.get('location')).to.equal(`${PATH}/${endpoint.id}`);
    const one = await http('GET', `${PATH}/${endpoint.id}`, { headers: admin });
    expect(one.status, one.text).to.equal(200);
    expect(one.body.data).to.deep.equal({
      id: endpoint.id,
      url: endpoint.url,
      types: null,
      status: 'ENABLED',
      createdAt: endpoint.createdAt,
    });
    const list = await http('GET', PATH, { headers: admin });
    expect(list.body.data).to.deep.equal([one.body.data]);
    expect(one.text + list.text).not.to.include(endpoint.secret);
  });

  it('when the create is retried with its Idempotency-Key, then the replay is the same endpoint with secret null, and the stored answer holds no secret', async () => {
    const tenant = uniqueTenant();
    const admin = bearer(tenant, '2', 'admin');
    const key = idempotencyKey();
    const body = { url: 'https://example.com/a', types: ['payment.succeeded', 'order.paid'] };
    const first = await createEndpoint(admin, body, key);
    expect(first.status, first.text).to.equal(201);
    expect(first.body.data.secret).to.match(/^whsec_/);
    expect(first.body.data.types).to.deep.equal(['order.paid', 'payment.succeeded']);
    const replay = await createEndpoint(admin, body, key);
    expect(replay.status, replay.text).to.equal(201);
    expect(replay.headers.get('idempotent-replayed')).to.equal('true');
    expect(replay.headers.get('location')).to.equal(`${PATH}/${first.body.data.id}`);
    expect(replay.body.data).to.deep.equal({ ...first.body.data, secret: null });
    const list = await http('GET', PATH, { headers: admin });
    expect(list.body.data).to.have.length(1);

    const server = await sharedServer();
    const records = await sqlRows<{ scope_key: string; response_body: string }>(
      server.services.sequelize,
      `SELECT scope_key, response_body FROM idempotency_records WHERE scope_key LIKE $1`,
      [`%${tenant}%`],
    );
    expect(records).to.have.length(1);
    const cipher = (server.services.idempotency as unknown as { cipher: ResponseCipher }).cipher;
    const stored = openReply(cipher, records[0].scope_key, records[0].response_body);
    expect((stored.body as { data: { secret: unknown } }).data.secret).to.equal(null);
    expect(JSON.stringify(stored)).not.to.include(first.body.data.secret.slice(6));
    expect(records[0].response_body).not.to.include(first.body.data.secret.slice(6));
  });

  it('when the url or types are invalid or a field is unknown, then 400 naming the field', async () => {
    const admin = bearer(uniqueTenant(), '3', 'admin');
    const cases: Array<[object, string]> = [
      [{ url: 'not a url' }, 'url:'],
      [{ url: 'ftp://example.com/x' }, 'url:'],
      [{ url: 'file:///etc/passwd' }, 'url:'],
      [{ url: `https://example.com/${'a'.repeat(2030)}` }, 'url:'],
      [{ url: 'https://user:pw@example.com/' }, 'url:'],
      [{}, 'url:'],
      [{ url: 'https://example.com', types: [] }, 'types'],
      [{ url: 'https://example.com', types: ['order.deleted'] }, 'types'],
      [{ url: 'https://example.com', types: 'order.created' }, 'types'],
      [{ url: 'https://example.com', secret: 'whsec_mine' }, ''],
    ];
    for (const [body, field] of cases) {
      const res = await createEndpoint(admin, body);
      expect(res.status, `${JSON.stringify(body).slice(0, 80)} → ${res.text}`).to.equal(400);
      expect(res.body.code).to.equal(400);
      expect(res.body.message).to.include(field);
    }
    const list = await http('GET', PATH, { headers: admin });
    expect(list.body.data).to.deep.equal([]);
  });

  it('when a user (not an admin) calls any endpoint operation, then 403', async () => {
    const tenant = uniqueTenant();
    const admin = bearer(tenant, '4', 'admin');
    const user = bearer(tenant, '5', 'user');
    const made = await createEndpoint(admin, { url: 'https://example.com/u' });
    const id = made.body.data.id;
    const calls: Array<[string, string, object?]> = [
      ['POST', PATH, { url: 'https://example.com/x' }],
      ['GET', PATH],
      ['GET', `${PATH}/${id}`],
      ['GET', `${PATH}/${id}/deliveries`],
      ['DELETE', `${PATH}/${id}`],
    ];
    for (const [method, path, body] of calls) {
      const res = await http(method, path, { headers: user, body });
      expect(res.status, `${method} ${path}: ${res.text}`).to.equal(403);
    }
    expect((await http('GET', `${PATH}/${id}`, { headers: admin })).status).to.equal(200);
  });

  it("when an endpoint is deleted, then 204, then 404 for get, deliveries and a second delete; another tenant's id is 404", async () => {
    const admin = bearer(uniqueTenant(), '6', 'admin');
    const other = bearer(uniqueTenant(), '6', 'admin');
    const id = (await createEndpoint(admin, { url: 'https://example.com/d' })).body.data.id;
    expect((await http('GET', `${PATH}/${id}`, { headers: other })).status).to.equal(404);
    expect((await http('DELETE', `${PATH}/${id}`, { headers: other })).status).to.equal(404);
    const del = await http('DELETE', `${PATH}/${id}`, { headers: admin });
    expect(del.status, del.text).to.equal(204);
    expect(del.text).to.equal('');
    expect((await http('GET', `${PATH}/${id}`, { headers: admin })).status).to.equal(404);
    expect((await http('GET', `${PATH}/${id}/deliveries`, { headers: admin })).status).to.equal(404);
    expect((await http('DELETE', `${PATH}/${id}`, { headers: admin })).status).to.equal(404);
    expect((await http('GET', PATH, { headers: admin })).body.data).to.deep.equal([]);
  });

  it('when events happen, then each matching endpoint receives them signed (types filter), an endpoint created later gets none of the earlier ones, and deliveries are listed newest first', async () => {
    const tenant = uniqueTenant();
    const admin = bearer(tenant, '7', 'admin');
    const names = { all: `all-${tenant}`, paid: `paid-${tenant}`, late: `late-${tenant}` };
    for (const name of Object.values(names)) receiver.hook(name);
    const all = await createEndpoint(admin, { url: receiver.url(names.all) });
    receiver.setSecret(names.all, all.body.data.secret);
    const paid = await createEndpoint(admin, { url: receiver.url(names.paid), types: ['order.paid'] });
    receiver.setSecret(names.paid, paid.body.data.secret);

    const order = await createOrder(undefined, admin, 'mo-wh-1');
    await until('order.created at the all-types endpoint', () =>
      receiver.of(names.all).some((r) => r.accepted),
    );
    const late = await createEndpoint(admin, { url: receiver.url(names.late) });
    receiver.setSecret(names.late, late.body.data.secret);
    const pay = await http('POST', '/api/v1/payments', {
      headers: { ...admin, 'Idempotency-Key': idempotencyKey() },
      body: { merchantOrderNo: 'mo-wh-1', amount: order.amount },
    });
    expect(pay.status, pay.text).to.equal(201);
    const types = (name: string) =>
      [
        ...new Set(
          receiver
            .of(name)
            .filter((r) => r.accepted)
            .map((r) => r.body.type),
        ),
      ].sort();
    await until(
      'every event at every matching endpoint',
      () => types(names.all).length === 3 && types(names.paid).length === 1 && types(names.late).length === 2,
    );
    expect(types(names.all)).to.deep.equal(['order.created', 'order.paid', 'payment.succeeded']);
    expect(types(names.paid)).to.deep.equal(['order.paid']);
    expect(types(names.late)).to.deep.equal(['order.paid', 'payment.succeeded']);
    for (const name of Object.values(names)) {
      for (const r of receiver.of(name)) {
        expect(r.verified, `signature of ${r.webhookId} at ${name}`).to.equal(true);
        expect(r.webhookId).to.equal(r.body.id);
      }
    }
    const created = receiver.of(names.all).find((r) => r.body.type === 'order.created');
    expect(created?.body.data).to.deep.equal(order);

    const listed = await deliveriesOf(admin, all.body.data.id);
    expect(listed).to.have.length(3);
    const ids = listed.map((d) => BigInt(d.id as string));
    expect(ids).to.deep.equal([...ids].sort((a, b) => (a > b ? -1 : a < b ? 1 : 0)));
    await until('deliveries listed as SUCCEEDED', async () =>
      (await deliveriesOf(admin, all.body.data.id)).every((d) => d.status === 'SUCCEEDED'),
    );
    const done = await deliveriesOf(admin, all.body.data.id);
    expect(done[2]).to.include({
      type: 'order.created',
      eventId: created?.webhookId,
      attempts: 1,
      lastStatusCode: 204,
      lastError: null,
      nextAttemptAt: null,
    });
    expect(Object.keys(done[0]).sort()).to.deep.equal([
      'attempts',
      'createdAt',
      'eventId',
      'id',
      'lastError',
      'lastStatusCode',
      'nextAttemptAt',
      'status',
      'type',
      'updatedAt',
    ]);
    const paged = await deliveriesOf(admin, all.body.data.id, '?page=2&size=2');
    expect(paged.map((d) => d.id)).to.deep.equal([done[2].id]);
  });

  it('when an endpoint is deleted, then it receives none of the later events while another endpoint does', async () => {
    const tenant = uniqueTenant();
    const admin = bearer(tenant, '8', 'admin');
    const gone = `gone-${tenant}`;
    const stays = `stays-${tenant}`;
    receiver.hook(gone);
    receiver.hook(stays);
    const a = await createEndpoint(admin, { url: receiver.url(gone) });
    receiver.setSecret(gone, a.body.data.secret);
    const b = await createEndpoint(admin, { url: receiver.url(stays) });
    receiver.setSecret(stays, b.body.data.secret);
    expect((await http('DELETE', `${PATH}/${a.body.data.id}`, { headers: admin })).status).to.equal(204);
    const orders = [];
    for (let i = 0; i < 3; i++) orders.push(await createOrder(undefined, admin, `mo-gone-${i}`));
    await until(
      'the remaining endpoint got the three events',
      () => receiver.of(stays).filter((r) => r.accepted).length >= 3,
    );
    expect(receiver.of(gone)).to.deep.equal([]);
  });

  it("when the create is retried over tRPC HTTP with the REST call's key, then it is the same endpoint, the secret only in the first answer", async () => {
    const tenant = uniqueTenant();
    const admin = bearer(tenant, '10', 'admin');
    const key = idempotencyKey();
    const body = { url: 'https://example.com/both' };
    const rest = await createEndpoint(admin, body, key);
    expect(rest.status, rest.text).to.equal(201);
    const again = await trpcMutation('webhookEndpoints.create', body, { ...admin, 'Idempotency-Key': key });
    expect(again.status, again.text).to.equal(200);
    expect(again.headers.get('idempotent-replayed')).to.equal('true');
    expect(again.body.result.data.data).to.deep.equal({ ...rest.body.data, secret: null });
    const fresh = await trpcMutation('webhookEndpoints.create', body, admin);
    expect(fresh.body.result.data.data.secret).to.match(/^whsec_/);
    expect(fresh.body.result.data.data.id).not.to.equal(rest.body.data.id);
  });

  it('when called over tRPC, then create (secret once), list, get, deliveries and delete work the same', async () => {
    const tenant = uniqueTenant();
    const { caller } = await callerFor(bearer(tenant, '9', 'admin'));
    const made = (await caller.webhookEndpoints.create({
      url: 'https://example.com/t',
      types: ['order.created'],
    })) as {
      data: { id: string; secret: string | null };
    };
    expect(made.data.secret).to.match(/^whsec_/);
    const list = await caller.webhookEndpoints.list({});
    expect(list.data.map((e) => e.id)).to.deep.equal([made.data.id]);
    expect(list.data[0]).not.to.have.property('secret');
    expect((await caller.webhookEndpoints.get({ id: made.data.id })).data.types).to.deep.equal([
      'order.created',
    ]);
    expect((await caller.webhookEndpoints.deliveries({ id: made.data.id })).data).to.deep.equal([]);
    await caller.webhookEndpoints.delete({ id: made.data.id });
    expect((await caller.webhookEndpoints.list({})).data).to.deep.equal([]);
  });
});

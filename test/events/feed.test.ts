import { expect } from 'chai';
import { http } from '../support/http.js';
import { createOrder } from '../support/orders.js';
import { sharedServer } from '../support/server.js';
import { bearer, idempotencyKey, uniqueTenant } from '../support/tokens.js';
import { trpcClient } from '../support/trpc-client.js';
import { expectError, expectSuccess } from '../support/users.js';

type Event = { id: string; type: string; createdAt: string; data: Record<string, unknown> };
type Page = { items: Event[]; next: string };

async function feed(auth: Record<string, string>, query = ''): Promise<Page> {
  return expectSuccess(await http('GET', `/api/v1/events${query}`, { headers: auth }));
}

/** Pages through the whole feed from the start, `limit` at a time; returns every item and the last cursor. */
async function wholeFeed(auth: Record<string, string>, limit: number, types?: string) {
  const items: Event[] = [];
  let after: string | undefined;
  for (;;) {
    const q = new URLSearchParams({
      limit: String(limit),
      ...(after ? { after } : {}),
      ...(types ? { types } : {}),
    });
    const page = await feed(auth, `?${q}`);
    expect(page.items.length).to.be.at.most(limit);
    items.push(...page.items);
    if (page.items.length > 0) expect(page.next).to.equal(page.items.at(-1)?.id);
    else expect(page.next).to.equal(after ?? 'evt_0_0');
    if (page.items.length < limit) return { items, next: page.next };
    after = page.next;
  }
}

async function payOrder(auth: Record<string, string>, merchantOrderNo: string) {
  const res = await http('POST', '/api/v1/payments', {
    headers: { ...auth, 'Idempotency-Key': idempotencyKey() },
    body: { merchantOrderNo, amount: '25.00' },
  });
  expect(res.status, res.text).to.equal(201);
  return res.body.data;
}

describe('events: the feed (GET /api/v1/events, events.list)', () => {
  const tenant = uniqueTenant('feed');
  const admin = bearer(tenant, '820000001', 'admin');
  const alice = bearer(tenant, '820000002');
  const bob = bearer(tenant, '820000003');
  const stranger = bearer(uniqueTenant('feed-other'), '820000004', 'admin');

  before(async () => {
    for (let i = 0; i < 3; i++) await createOrder(undefined, alice, `a-${i}`);
    for (let i = 0; i < 2; i++) await createOrder(undefined, bob, `b-${i}`);
    await payOrder(alice, 'a-0');
    await payOrder(bob, 'b-0');
  });

  it('when an admin pages through the feed, then every event of the tenant arrives once, in feed order, whatever the page size', async () => {
    const all = await wholeFeed(admin, 100);
    expect(all.items.map((e) => e.type).sort()).to.deep.equal(
      [
        ...Array(5).fill('order.created'),
        'order.paid',
        'order.paid',
        'payment.succeeded',
        'payment.succeeded',
      ].sort(),
    );
    for (const limit of [1, 2, 4]) {
      const paged = await wholeFeed(admin, limit);
      expect(paged.items).to.deep.equal(all.items);
    }
    // The order is (tx_id, seq): the id says it.
    const positions = all.items.map((e) => e.id.slice(4).split('_').map(BigInt));
    for (let i = 1; i < positions.length; i++) {
      const [a, b] = [positions[i - 1], positions[i]];
      expect(
        a[0] < b[0] || (a[0] === b[0] && a[1] < b[1]),
        `${all.items[i - 1].id} before ${all.items[i].id}`,
      ).to.be.true;
    }
    // After the last event: an empty page whose next is that cursor again.
    const after = await feed(admin, `?after=${all.next}`);
    expect(after).to.deep.equal({ items: [], next: all.next });
  });

  it('when a user reads the feed, then only the events of their own resources; another tenant sees none of them', async () => {
    const all = (await wholeFeed(admin, 100)).items;
    const mine = (await wholeFeed(alice, 100)).items;
    expect(mine.map((e) => e.id)).to.deep.equal(
      all.filter((e) => (e.data.merchantOrderNo as string).startsWith('a-')).map((e) => e.id),
    );
    expect(mine).to.have.length(5);
    const bobs = (await wholeFeed(bob, 100)).items;
    expect(bobs).to.have.length(4);
    expect(await feed(stranger)).to.deep.equal({ items: [], next: 'evt_0_0' });
  });

  it('when types are given, then only those types, in the same order', async () => {
    const all = (await wholeFeed(admin, 100)).items;
    const paid = await wholeFeed(admin, 1, 'order.paid,payment.succeeded');
    expect(paid.items).to.deep.equal(
      all.filter((e) => e.type === 'order.paid' || e.type === 'payment.succeeded'),
    );
  });

  it('when the same page is asked over tRPC, then the answer is the REST answer', async () => {
    const { url } = await sharedServer();
    const { client } = trpcClient(url, admin);
    const all = (await wholeFeed(admin, 100)).items;
    const rest = await feed(admin, `?after=${all[1].id}&limit=3&types=order.created,order.paid`);
    const trpc = await client.events.list.query({
      after: all[1].id,
      limit: 3,
      types: 'order.created,order.paid',
    });
    expect(trpc).to.deep.equal({ code: 200, message: 'Success', data: rest });
    expect(rest.items.length).to.be.greaterThan(0);
  });

  it('when limit, types or after are bad, then 400 naming the field; without a token, 401', async () => {
    for (const [query, field] of [
      ['?limit=0', 'limit'],
      ['?limit=101', 'limit'],
      ['?limit=abc', 'limit'],
      ['?types=order.created,order.shipped', 'types'],
      ['?after=123', 'after'],
      ['?after=evt_abc', 'after'],
      ['?after=evt_1_99999999999999999999', 'after'],
    ]) {
      const res = await http('GET', `/api/v1/events${query}`, { headers: admin });
      expect(res.status, `${query}: ${res.text}`).to.equal(400);
      expectError(res, 400);
      expect(res.body.message, query).to.match(new RegExp(`^${field}: `));
    }
    expectError(await http('GET', '/api/v1/events'), 401);
  });
});

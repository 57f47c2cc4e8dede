import { setTimeout as sleep } from 'node:timers/promises';
import { expect } from 'chai';
import pg from 'pg';
import { subscribe } from '../support/event-subscriber.js';
import { http } from '../support/http.js';
import { createOrder, orderInOpenTransaction } from '../support/orders.js';
import { sharedServer } from '../support/server.js';
import { bearer, idempotencyKey, uniqueTenant } from '../support/tokens.js';
import { trpcClient } from '../support/trpc-client.js';
import { expectError, expectSuccess } from '../support/users.js';

type Event = { id: string; type: string; createdAt: string; data: Record<string, unknown> };
type Page = { items: Event[]; next: string };

/** Feed order of two cursors (event ids or `next` values): negative when `a` comes first. */
function compare(a: string, b: string): number {
  const [ta, sa] = a.slice(4).split('_').map(BigInt);
  const [tb, sb] = b.slice(4).split('_').map(BigInt);
  if (ta !== tb) return ta < tb ? -1 : 1;
  return sa === sb ? 0 : sa < sb ? -1 : 1;
}

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
    // A full page: its last event (more may follow). A shorter one: the horizon the read reached,
    // at or past its last event (or `after`), never before.
    const last = page.items.at(-1)?.id ?? after ?? 'evt_0_0';
    if (page.items.length === limit) expect(page.next).to.equal(last);
    else expect(compare(page.next, last)).to.be.at.least(0);
    if (page.items.length < limit) return { items, next: page.next };
    after = page.next;
  }
}

/** Until the condition holds, bounded: a subscriber's events arrive asynchronously. */
async function until(what: string, condition: () => boolean, ms = 10000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await sleep(20);
  }
}

/**
 * Until the feed's horizon has passed every transaction begun so far, so that a read shows every write
 * already answered. An answered write's event enters the feed once every older writing transaction of
 * the database has ended (docs/DECISIONS.md "Events: feed order"): a background job of the server may
 * still be open for a moment after the answer. A transaction id taken now is above every such write's;
 * the horizon (events_horizon(), as the feed reads it) is past it once every transaction of this
 * database below it has ended.
 */
async function horizonPassed(): Promise<void> {
  const client = new pg.Client({ connectionString: process.env.TEST_DATABASE_URL });
  await client.connect();
  try {
    const { rows } = await client.query<{ x: string }>('SELECT pg_current_xact_id()::text AS x');
    const deadline = Date.now() + 10000;
    for (;;) {
      const { rows: h } = await client.query<{ passed: boolean }>(
        'SELECT (SELECT events_horizon()) > $1::xid8 AS passed',
        [rows[0].x],
      );
      if (h[0].passed) return;
      if (Date.now() > deadline) throw new Error('timed out waiting for the feed horizon to pass the writes');
      await sleep(10);
    }
  } finally {
    await client.end();
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
    await horizonPassed();
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
    // After the last event: an empty page whose next is that cursor, or a later one.
    const after = await feed(admin, `?after=${all.next}`);
    expect(after.items).to.deep.equal([]);
    expect(compare(after.next, all.next)).to.be.at.least(0);
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
    // The stranger sees nothing, and its cursor is already past every event of this tenant.
    const strangers = await feed(stranger);
    expect(strangers.items).to.deep.equal([]);
    expect(compare(strangers.next, all.at(-1)?.id ?? '')).to.be.greaterThan(0);
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
    // types as an array (a tRPC caller's form, as the subscription takes it) and as a repeated query
    // parameter: the same page.
    const asArray = await client.events.list.query({
      after: all[1].id,
      limit: 3,
      types: ['order.created', 'order.paid'],
    });
    expect(asArray).to.deep.equal(trpc);
    expect(
      await feed(admin, `?after=${all[1].id}&limit=3&types=order.created&types=order.paid`),
    ).to.deep.equal(rest);
  });

  it("when every event after the cursor is of another type or another user's, then the empty page's next is past them, and a later matching event is still read from that next (and by a subscriber resuming from it)", async () => {
    const feedSkip = uniqueTenant('feed-skip');
    const adminId = '820000011';
    const admin = bearer(feedSkip, adminId, 'admin');
    const carol = bearer(feedSkip, '820000012');
    const dave = bearer(feedSkip, '820000013');
    for (let i = 0; i < 3; i++) await createOrder(undefined, carol, `c-${i}`);
    await horizonPassed();
    const skipped = (await wholeFeed(admin, 100)).items;
    expect(skipped.map((e) => e.type)).to.deep.equal(Array(3).fill('order.created'));
    const newest = skipped[2].id;

    // A rare type, and a user none of whose events are among them: nothing to read, and no reason
    // to scan the same events again next time.
    const rare = await feed(admin, '?types=order.paid');
    expect(rare.items).to.deep.equal([]);
    expect(compare(rare.next, newest)).to.be.greaterThan(0);
    const daves = await feed(dave);
    expect(daves.items).to.deep.equal([]);
    expect(compare(daves.next, newest)).to.be.greaterThan(0);
    const { url } = await sharedServer();
    const overTrpc = await trpcClient(url, admin).client.events.list.query({ types: 'order.paid' });
    expect(overTrpc.data.items).to.deep.equal([]);
    expect(compare(overTrpc.data.next, newest)).to.be.greaterThan(0);

    const resumed = subscribe({ url }, feedSkip, adminId, 'admin', {
      types: ['order.paid'],
      lastEventId: rare.next,
    });
    try {
      await resumed.started;
      await payOrder(carol, 'c-0');
      await createOrder(undefined, dave, 'd-0');
      await horizonPassed();
      const paid = await feed(admin, `?types=order.paid&after=${rare.next}`);
      expect(paid.items.map((e) => [e.type, e.data.merchantOrderNo])).to.deep.equal([['order.paid', 'c-0']]);
      const davesLater = await feed(dave, `?after=${daves.next}`);
      expect(davesLater.items.map((e) => [e.type, e.data.merchantOrderNo])).to.deep.equal([
        ['order.created', 'd-0'],
      ]);
      await until('the resumed subscriber received the order.paid', () => resumed.received.length >= 1);
      expect(resumed.received.map((e) => e.id)).to.deep.equal(paid.items.map((e) => e.id));
      expect(resumed.errors).to.deep.equal([]);
    } finally {
      resumed.close();
    }
  });

  it('when a transaction that wrote an event is still open while a later one commits, then next stops before its event, and a read from that next after it commits returns both, in feed order', async () => {
    const feedOpen = uniqueTenant('feed-open');
    const adminId = '820000021';
    const admin = bearer(feedOpen, adminId, 'admin');
    const { client: held, orderId } = await orderInOpenTransaction(feedOpen, adminId, 'held');
    try {
      const mine = await held.query('SELECT id FROM events WHERE resource_id = $1::text AND tenant_id = $2', [
        orderId,
        feedOpen,
      ]);
      const heldId = mine.rows[0].id as string;
      // Committed while `held` is open: a later transaction id, so past the horizon as well.
      await createOrder(undefined, admin, 'later');
      const during = await feed(admin);
      expect(during.items).to.deep.equal([]);
      expect(compare(during.next, heldId), `${during.next} before ${heldId}`).to.be.lessThan(0);
      await held.query('COMMIT');
      await horizonPassed();
      const after = await feed(admin, `?after=${during.next}`);
      expect(after.items.map((e) => e.data.merchantOrderNo)).to.deep.equal(['held', 'later']);
      expect(after.items[0].id).to.equal(heldId);
    } finally {
      await held.end();
    }
  });

  it("when another database of the same PostgreSQL holds a transaction open, then the feed does not wait for it (a transaction of the service's database still holds the horizon)", async () => {
    const feedOther = uniqueTenant('feed-otherdb');
    const admin = bearer(feedOther, '820000031', 'admin');
    const otherUrl = new URL(String(process.env.TEST_DATABASE_URL));
    otherUrl.pathname = '/postgres';
    const other = new pg.Client({ connectionString: otherUrl.toString() });
    const own = new pg.Client({ connectionString: process.env.TEST_DATABASE_URL });
    await other.connect();
    await own.connect();
    try {
      await other.query('BEGIN');
      const { rows: held } = await other.query<{ x: string }>('SELECT pg_current_xact_id()::text AS x');
      await createOrder(undefined, admin, 'beside-other-db');
      // Bounded: the server's own short transactions end at once; the other database's never does here.
      await horizonPassed();
      const page = await feed(admin);
      expect(page.items.map((e) => e.data.merchantOrderNo)).to.deep.equal(['beside-other-db']);
      expect(compare(page.next, `evt_${held[0].x}_0`)).to.be.greaterThan(0);
      // One of this database's, still open, holds the horizon where it was: at or below its id.
      await own.query('BEGIN');
      const { rows: mine } = await own.query<{ x: string }>('SELECT pg_current_xact_id()::text AS x');
      const { rows: h } = await own.query<{ held: boolean }>(
        'SELECT (SELECT events_horizon()) <= $1::xid8 AS held',
        [mine[0].x],
      );
      expect(h[0].held).to.equal(true);
    } finally {
      await other.end();
      await own.end();
    }
  });

  it('when limit, types or after are bad, then 400 naming the field; without a token, 401', async () => {
    // [query, the field the 400 names, its whole message where the test pins it]
    const cases: Array<[string, string, string?]> = [
      ['?limit=0', 'limit'],
      ['?limit=101', 'limit'],
      ['?limit=abc', 'limit', 'limit: must be a positive integer'],
      ['?types=order.created,order.shipped', 'types'],
      ['?types=order.created&types=order.shipped', 'types'],
      ['?after=123', 'after'],
      ['?after=evt_abc', 'after'],
      ['?after=evt_1_99999999999999999999', 'after'],
    ];
    for (const [query, field, message] of cases) {
      const res = await http('GET', `/api/v1/events${query}`, { headers: admin });
      expect(res.status, `${query}: ${res.text}`).to.equal(400);
      expectError(res, 400);
      expect(res.body.message, query).to.match(new RegExp(`^${field}: `));
      if (message) expect(res.body.message, query).to.equal(message);
    }
    expectError(await http('GET', '/api/v1/events'), 401);
  });
});

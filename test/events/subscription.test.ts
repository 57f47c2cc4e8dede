import { setTimeout as sleep } from 'node:timers/promises';
import { expect } from 'chai';
import { subscribe } from '../support/event-subscriber.js';
import { http } from '../support/http.js';
import { createOrder, orderInOpenTransaction } from '../support/orders.js';
import { type Instance, killAll, startInstance } from '../support/processes.js';
import { bearer, uniqueTenant } from '../support/tokens.js';

type Event = { id: string; type: string; data: Record<string, unknown> };

/** The whole feed of the caller, read over REST from an instance. */
async function wholeFeed(baseUrl: string, auth: Record<string, string>): Promise<Event[]> {
  const items: Event[] = [];
  let after = '';
  for (;;) {
    const res = await http('GET', `/api/v1/events?limit=100${after ? `&after=${after}` : ''}`, {
      baseUrl,
      headers: auth,
    });
    expect(res.status, res.text).to.equal(200);
    items.push(...res.body.data.items);
    if (res.body.data.items.length < 100) return items;
    after = res.body.data.next;
  }
}

/**
 * The whole feed once it shows what the test wrote (`shows`). An acknowledged write's event is in the
 * feed once every older writing transaction of the cluster has ended (docs/DECISIONS.md "Events: feed
 * order"): an instance's background job, or another database's transaction on the same server, can
 * hold it back for a moment after the answer, so one read straight after the writes may miss the last
 * of them.
 */
async function feedShowing(
  baseUrl: string,
  auth: Record<string, string>,
  shows: (feed: Event[]) => boolean,
): Promise<Event[]> {
  let feed: Event[] = [];
  await until('the feed shows the writes', async () => {
    feed = await wholeFeed(baseUrl, auth);
    return shows(feed);
  });
  return feed;
}

async function until(what: string, condition: () => boolean | Promise<boolean>, ms = 60000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await sleep(50);
  }
}

const ids = (events: Event[]) => events.map((e) => e.id);

describe('events: the subscription (events.onEvent over SSE)', function () {
  this.timeout(240000);
  after(killAll);

  it('when events are written on another instance, then a subscriber gets each once, in feed order, also across a SIGKILL of its instance, a reconnection to a third and a restart of all', async () => {
    const tenant = uniqueTenant('sub');
    const adminId = '840000001';
    const admin = bearer(tenant, adminId, 'admin');
    const env = { RECOVERER_INTERVAL_MS: '3600000' };
    const [a, b, c] = [await startInstance(env), await startInstance(env), await startInstance(env)];
    const target = { url: a.url };
    const sub = subscribe(target, tenant, adminId, 'admin');
    await sub.started;

    // A writer on B, creating orders one after another while the subscriber's instance dies.
    let writing = true;
    let written = 0;
    let writer: Instance = b;
    const writes = (async () => {
      while (writing) {
        await createOrder(writer.url, admin, `mo-${written}`);
        written += 1;
      }
    })();
    try {
      await until('3 events arrived from A', () => sub.received.length >= 3);
      a.kill();
      await a.exited;
      const beforeKill = sub.received.length;
      target.url = c.url;
      await until('3 more events arrived through C', () => sub.received.length >= beforeKill + 3);
    } finally {
      writing = false;
      await writes;
    }
    let feed = await feedShowing(b.url, admin, (f) => f.length >= written);
    expect(feed).to.have.length(written);
    await until('every event arrived', () => sub.received.length >= feed.length);
    expect(ids(sub.received)).to.deep.equal(ids(feed));
    expect(sub.errors).to.deep.equal([]);

    // Every instance stops (SIGKILL); a new one starts: the same subscriber reconnects to it with its last id.
    const lastBefore = sub.received.at(-1)?.id as string;
    b.kill();
    c.kill();
    await Promise.all([b.exited, c.exited]);
    const d = await startInstance(env);
    target.url = d.url;
    writer = d;
    for (let i = 0; i < 3; i++) await createOrder(d.url, admin, `after-restart-${i}`);
    feed = await feedShowing(d.url, admin, (f) => f.length >= written + 3);
    await until('the events after the restart arrived', () => sub.received.length >= feed.length);
    expect(ids(sub.received)).to.deep.equal(ids(feed));

    // A new subscriber that starts from an id it was given receives exactly the feed after it.
    const resumed = subscribe({ url: d.url }, tenant, adminId, 'admin', { lastEventId: lastBefore });
    const later = feed.slice(feed.findIndex((e) => e.id === lastBefore) + 1);
    expect(later).to.have.length(3);
    await until('the resumed subscriber caught up', () => resumed.received.length >= later.length);
    // One more event reaches both: nothing after the last one was held back, nothing came twice.
    await createOrder(d.url, admin, 'last');
    feed = await feedShowing(d.url, admin, (f) => f.length >= written + 4);
    await until('the last event arrived at both', () =>
      [sub, resumed].every((s) => s.received.at(-1)?.id === feed.at(-1)?.id),
    );
    expect(ids(resumed.received)).to.deep.equal(ids(feed.slice(feed.length - later.length - 1)));
    expect(ids(sub.received)).to.deep.equal(ids(feed));
    sub.close();
    resumed.close();
  });

  it('when its instance shuts down (SIGTERM), then the stream ends at once and the subscriber resumes on another instance with no gap and no duplicate', async () => {
    const tenant = uniqueTenant('sub-term');
    const adminId = '840000031';
    const admin = bearer(tenant, adminId, 'admin');
    // A shutdown that waited for the open stream would outlast this test's time-out.
    const a = await startInstance({ RECOVERER_INTERVAL_MS: '3600000', SHUTDOWN_TIMEOUT_MS: '600000' });
    const b = await startInstance({ RECOVERER_INTERVAL_MS: '3600000' });
    const target = { url: a.url };
    const sub = subscribe(target, tenant, adminId, 'admin');
    await sub.started;
    for (let i = 0; i < 2; i++) await createOrder(b.url, admin, `before-${i}`);
    await until('2 events arrived from A', () => sub.received.length >= 2);
    target.url = b.url;
    expect(await a.stop(), a.output()).to.equal(0);
    for (let i = 0; i < 2; i++) await createOrder(b.url, admin, `after-${i}`);
    const feed = await feedShowing(b.url, admin, (f) => f.length >= 4);
    expect(feed).to.have.length(4);
    await until('every event arrived', () => sub.received.length >= 4);
    expect(ids(sub.received)).to.deep.equal(ids(feed));
    expect(sub.errors).to.deep.equal([]);
    sub.close();
  });

  it("when a user subscribes with types, then only their own resources' events of those types arrive", async () => {
    const tenant = uniqueTenant('sub-user');
    const instance = await startInstance({ RECOVERER_INTERVAL_MS: '3600000' });
    const sub = subscribe({ url: instance.url }, tenant, '840000011', 'user', { types: ['order.created'] });
    await sub.started;
    const mine = bearer(tenant, '840000011');
    const other = bearer(tenant, '840000012');
    await createOrder(instance.url, other, 'theirs-1');
    await createOrder(instance.url, mine, 'mine-1');
    await http('POST', '/api/v1/payments', {
      baseUrl: instance.url,
      headers: { ...mine, 'Idempotency-Key': `key-${tenant}-pay-1` },
      body: { merchantOrderNo: 'mine-1', amount: '25.00' },
    });
    await createOrder(instance.url, other, 'theirs-2');
    await createOrder(instance.url, mine, 'mine-2');
    // The fence: one more event the subscriber must get; anything wrongly sent would have come before it.
    await createOrder(instance.url, mine, 'mine-3');
    const shown = await feedShowing(instance.url, mine, (f) =>
      f.some((e) => e.data.merchantOrderNo === 'mine-3'),
    );
    const expected = shown.filter((e) => e.type === 'order.created');
    expect(expected.map((e) => e.data.merchantOrderNo)).to.deep.equal(['mine-1', 'mine-2', 'mine-3']);
    await until('the fence arrived', () => sub.received.some((e) => e.data.merchantOrderNo === 'mine-3'));
    expect(ids(sub.received)).to.deep.equal(ids(expected));
    sub.close();
  });

  it('when a subscriber with types reads past events it cannot see while a transaction that writes one it can is still open, then that event still arrives when it commits, in feed order', async () => {
    const tenant = uniqueTenant('sub-skip');
    const userId = '840000021';
    const instance = await startInstance({ RECOVERER_INTERVAL_MS: '3600000' });
    const mine = bearer(tenant, userId);
    const sub = subscribe({ url: instance.url }, tenant, userId, 'user', { types: ['order.created'] });
    await sub.started;
    await createOrder(instance.url, mine, 'before');
    await until('the first order arrived', () => sub.received.length === 1);
    const { client: held } = await orderInOpenTransaction(tenant, userId, 'held');
    try {
      // Events of other types wake the subscriber: it reads, sees none of its own, and moves on to
      // the feed's horizon, which the open transaction holds below its event.
      await createOrder(instance.url, mine, 'after');
      for (const n of [1, 2]) {
        const paid = await http('POST', '/api/v1/payments', {
          baseUrl: instance.url,
          headers: { ...mine, 'Idempotency-Key': `key-${tenant}-pay-${n}` },
          body: { merchantOrderNo: 'after', amount: '25.00' },
        });
        expect(paid.status, paid.text).to.be.oneOf([200, 201]);
      }
      await sleep(600);
      expect(sub.received.map((e) => e.data.merchantOrderNo)).to.deep.equal(['before']);
      await held.query('COMMIT');
    } finally {
      await held.end();
    }
    const shown = await feedShowing(instance.url, mine, (f) =>
      f.some((e) => e.data.merchantOrderNo === 'held'),
    );
    const expected = shown.filter((e) => e.type === 'order.created');
    expect(expected.map((e) => e.data.merchantOrderNo)).to.deep.equal(['before', 'held', 'after']);
    await until('every order arrived', () => sub.received.length >= 3);
    await sleep(300);
    expect(ids(sub.received)).to.deep.equal(ids(expected));
    expect(sub.errors).to.deep.equal([]);
    sub.close();
  });

  it('when an instance serves EVENT_MAX_SUBSCRIBERS streams, then one more is refused with 503 in its stream, and admitted once one has gone', async () => {
    const tenant = uniqueTenant('sub-cap');
    const adminId = '840000041';
    const admin = bearer(tenant, adminId, 'admin');
    const instance = await startInstance({ RECOVERER_INTERVAL_MS: '3600000', EVENT_MAX_SUBSCRIBERS: '1' });
    const first = subscribe({ url: instance.url }, tenant, adminId, 'admin');
    // Without a last id a stream starts at the feed's head: the order is written once it has started.
    await first.started;
    await createOrder(instance.url, admin, 'cap-1');
    await until('the first subscriber is served', () => first.received.length === 1);
    const refused = await fetch(`${instance.url}/trpc/events.onEvent?input=${encodeURIComponent('{}')}`, {
      headers: { ...admin, accept: 'text/event-stream' },
    });
    const text = await refused.text();
    expect(text).to.match(/event: serialized-error/);
    expect(text).to.match(/"httpStatus":503/);
    first.close();
    // From the first one's last id: a refusal retried by the client itself (the slot may not be free
    // yet) then still starts from there, not from a later head.
    const second = subscribe({ url: instance.url }, tenant, adminId, 'admin', {
      lastEventId: first.received[0].id,
    });
    await createOrder(instance.url, admin, 'cap-2');
    await until('the second subscriber is served', () => second.received.length >= 1);
    expect(second.received.map((e) => e.data.merchantOrderNo)).to.deep.equal(['cap-2']);
    second.close();
  });

  it('when the token is missing or the input is bad, then a tRPC HTTP error (401, 400) and no stream', async () => {
    const instance = await startInstance({ RECOVERER_INTERVAL_MS: '3600000' });
    const noToken = await fetch(`${instance.url}/trpc/events.onEvent?input=${encodeURIComponent('{}')}`, {
      headers: { accept: 'text/event-stream' },
    });
    const text = await noToken.text();
    expect(noToken.status, text).to.equal(401);
    expect(noToken.headers.get('www-authenticate')).to.equal('Bearer');
    expect(text).to.match(/"httpStatus":401/);
    const auth = bearer(uniqueTenant('sub-bad'), '840000021', 'admin');
    const bad = await fetch(
      `${instance.url}/trpc/events.onEvent?input=${encodeURIComponent(JSON.stringify({ lastEventId: 'nope' }))}`,
      { headers: { ...auth, accept: 'text/event-stream' } },
    );
    const badText = await bad.text();
    expect(bad.status, badText).to.equal(400);
    expect(badText).to.match(/"httpStatus":400/);
    expect(badText).to.match(/lastEventId: /);
    const badType = await fetch(
      `${instance.url}/trpc/events.onEvent?input=${encodeURIComponent(JSON.stringify({ types: ['order.shipped'] }))}`,
      { headers: { ...auth, accept: 'text/event-stream' } },
    );
    const badTypeText = await badType.text();
    expect(badType.status, badTypeText).to.equal(400);
    expect(badTypeText).to.include(
      'types: must be an array of event types or a comma-separated list of them',
    );
  });
});

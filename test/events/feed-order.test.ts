import { setTimeout as sleep } from 'node:timers/promises';
import { expect } from 'chai';
import pg from 'pg';
import { http } from '../support/http.js';
import { createOrder } from '../support/orders.js';
import { killAll, startInstance } from '../support/processes.js';
import { bearer, uniqueTenant } from '../support/tokens.js';

type Event = { id: string; type: string; data: Record<string, unknown> };

/** A cursor's (tx_id, seq); (0, 0) before the first read. */
const position = (cursor: string) => (cursor ? cursor.slice(4).split('_').map(BigInt) : [0n, 0n]);

async function until(what: string, condition: () => boolean | Promise<boolean>, ms = 60000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await sleep(50);
  }
}

describe('events: feed order under interleaved long and short transactions (the out-of-order commit trap)', function () {
  this.timeout(240000);
  after(killAll);

  it('when two instances commit short transactions while longer ones hold earlier events open, then a reader polling the feed collects every event once, none missed', async () => {
    const tenant = uniqueTenant('trap');
    const admin = bearer(tenant, '850000001', 'admin');
    const env = { RECOVERER_INTERVAL_MS: '3600000' };
    const instances = [await startInstance(env), await startInstance(env)];

    // The reader: small pages, alternating between the instances, from its last cursor.
    const collected: Event[] = [];
    let cursor = '';
    let reading = true;
    let polls = 0;
    const reader = (async () => {
      for (let i = 0; reading; i++) {
        const res = await http('GET', `/api/v1/events?limit=3${cursor ? `&after=${cursor}` : ''}`, {
          baseUrl: instances[i % 2].url,
          headers: admin,
        });
        expect(res.status, res.text).to.equal(200);
        collected.push(...res.body.data.items);
        cursor = res.body.data.next;
        polls += 1;
        if (res.body.data.items.length === 0) await sleep(20);
      }
    })();

    // Two writers, one per instance, committing short transactions one after another.
    let writing = true;
    let count = 0;
    const writers = instances.map(async (instance, w) => {
      for (let i = 0; writing; i++) {
        await createOrder(instance.url, admin, `w${w}-${i}`);
        count += 1;
      }
    });

    // Long transactions: each writes its event (an earlier transaction id and sequence number), stays
    // open while the writers commit later events, then commits.
    const held = new pg.Client({ connectionString: process.env.TEST_DATABASE_URL });
    const observer = new pg.Client({ connectionString: process.env.TEST_DATABASE_URL });
    await held.connect();
    await observer.connect();
    let overtaken = 0;
    try {
      for (let round = 0; round < 3; round++) {
        await held.query('BEGIN');
        const inserted = await held.query(
          `INSERT INTO orders (id, tenant_id, user_id, merchant_order_no, amount, currency, status, created_at, updated_at)
           VALUES (nextval('orders_id_seq'), $1, 850000001, $2, 1, 'USD', 'CREATED', now(), now()) RETURNING id`,
          [tenant, `long-${round}`],
        );
        const mine = await held.query(
          'SELECT seq FROM events WHERE resource_id = $1::text AND tenant_id = $2',
          [inserted.rows[0].id, tenant],
        );
        const seq = mine.rows[0].seq as string;
        // The trap is set: events with later sequence numbers are committed while this one is not.
        await until(`round ${round}: 3 later events committed`, async () => {
          const later = await observer.query(
            'SELECT count(*)::int AS n FROM events WHERE tenant_id = $1 AND seq > $2',
            [tenant, seq],
          );
          return later.rows[0].n >= 3;
        });
        overtaken += 1;
        // The reader reads the feed (twice over) while the later events are committed and this one is not.
        const seen = polls;
        await until(`round ${round}: the reader polled meanwhile`, () => polls >= seen + 2);
        await held.query('COMMIT');
        await sleep(100 * round);
      }
    } finally {
      writing = false;
      await Promise.all(writers);
      await held.end();
      await observer.end();
    }
    expect(overtaken).to.equal(3);

    // The final feed, read whole; the reader catches up with it and stops.
    const final: Event[] = [];
    let after = '';
    for (;;) {
      const res = await http('GET', `/api/v1/events?limit=100${after ? `&after=${after}` : ''}`, {
        baseUrl: instances[0].url,
        headers: admin,
      });
      final.push(...res.body.data.items);
      after = res.body.data.next;
      if (res.body.data.items.length < 100) break;
    }
    expect(final).to.have.length(count + 3);
    // Its cursor is the last event once it has read it, or the horizon past it (an empty page's next).
    const end = position(final.at(-1)?.id ?? '');
    await until('the reader reached the end of the feed', () => {
      const at = position(cursor);
      return at[0] > end[0] || (at[0] === end[0] && at[1] >= end[1]);
    });
    reading = false;
    await reader;
    expect(collected.map((e) => e.id)).to.deep.equal(final.map((e) => e.id));
    expect(new Set(collected.map((e) => e.id)).size).to.equal(collected.length);
  });
});

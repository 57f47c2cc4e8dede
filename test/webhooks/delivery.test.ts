import { existsSync } from 'node:fs';
import { expect } from 'chai';
import { http } from '../support/http.js';
import { createOrder } from '../support/orders.js';
import { type Instance, startInstance } from '../support/processes.js';
import { stopSharedServer } from '../support/server.js';
import { stablePort } from '../support/stable-port.js';
import { bearer, uniqueTenant } from '../support/tokens.js';
import { pidOfLocalPort, Receiver, retireEndpoints, until } from './receiver.js';

const PATH = '/api/v1/webhook-endpoints';

/**
 * Deliveries across real instances and a real receiver. Every instance of this file has the same
 * settings (the dispatch chain is shared, so any of them may run any attempt): a 3 s attempt
 * time-out (so a lease of 2 × 3 s + 10 s) and the contract's schedule scaled down from a 5 s first
 * wait to 300 ms (300 ms, 1.8 s, 7.2 s, 36 s, ...). The shared in-process server is stopped first: it
 * would take attempts with the default settings.
 */
const ENV = { WEBHOOK_TIMEOUT_MS: '3000', WEBHOOK_RETRY_BASE_MS: '300', RECOVERER_INTERVAL_MS: '3600000' };

interface Delivery {
  id: string;
  eventId: string;
  type: string;
  status: string;
  attempts: number;
  lastStatusCode: number | null;
  lastError: string | null;
}

describe('webhooks: deliveries across instances (real receiver, real processes)', function () {
  this.timeout(300_000);
  const receiver = new Receiver();
  const instances: Instance[] = [];

  async function endpoint(admin: Record<string, string>, name: string, body: object = {}) {
    const res = await http('POST', PATH, {
      baseUrl: instances[0].url,
      headers: admin,
      body: { url: receiver.url(name), ...body },
    });
    expect(res.status, res.text).to.equal(201);
    receiver.setSecret(name, res.body.data.secret);
    return res.body.data as { id: string; secret: string };
  }

  async function deliveries(
    admin: Record<string, string>,
    id: string,
    url = instances[0].url,
  ): Promise<Delivery[]> {
    const res = await http('GET', `${PATH}/${id}/deliveries?size=100`, { baseUrl: url, headers: admin });
    expect(res.status, res.text).to.equal(200);
    return res.body.data;
  }

  before(async () => {
    await stopSharedServer();
    await receiver.start();
    instances.push(await startInstance(ENV), await startInstance(ENV));
  });

  after(async () => {
    for (const i of instances) i.kill();
    await Promise.all(instances.map((i) => i.exited));
    await receiver.stop();
    await retireEndpoints(receiver.port);
  });

  it('when the receiver is down for a while and then up, then the event is delivered once it is up, after failed attempts', async () => {
    const tenant = uniqueTenant();
    const admin = bearer(tenant, '1', 'admin');
    const down = new Receiver();
    const port = await stablePort();
    const name = `down-${tenant}`;
    down.hook(name);
    await down.start(port);
    await down.stop();
    const res = await http('POST', PATH, {
      baseUrl: instances[0].url,
      headers: admin,
      body: { url: down.url(name) },
    });
    expect(res.status, res.text).to.equal(201);
    down.setSecret(name, res.body.data.secret);
    const order = await createOrder(instances[1].url, admin, 'mo-down');
    await until('two refused attempts', async () => {
      const [d] = await deliveries(admin, res.body.data.id);
      return d !== undefined && d.attempts >= 2;
    });
    const [failing] = await deliveries(admin, res.body.data.id);
    expect(failing).to.include({ status: 'PENDING', lastStatusCode: null });
    expect(failing.lastError).to.match(/ECONNREFUSED/);
    await down.start(port);
    try {
      await until('delivered once the receiver is up', () => down.of(name).some((r) => r.accepted), 120_000);
      const got = down.of(name);
      expect(got.every((r) => r.verified)).to.equal(true);
      expect(got[0].body.data).to.deep.equal(order);
      await until(
        'the delivery SUCCEEDED',
        async () => (await deliveries(admin, res.body.data.id))[0].status === 'SUCCEEDED',
      );
      const [done] = await deliveries(admin, res.body.data.id);
      expect(done.attempts).to.be.greaterThan(2);
      expect(done).to.include({ lastStatusCode: 204, lastError: null });
    } finally {
      await down.stop();
      await retireEndpoints(port);
    }
  });

  it('when the receiver answers 500, then times out, then 2xx, then the delivery succeeds at the third attempt, never two at once', async () => {
    const tenant = uniqueTenant();
    const admin = bearer(tenant, '2', 'admin');
    const name = `flaky-${tenant}`;
    receiver.hook(name, (n) => (n === 1 ? { status: 500 } : n === 2 ? { hold: true } : { status: 200 }));
    const ep = await endpoint(admin, name);
    await createOrder(instances[1].url, admin, 'mo-flaky');
    await until('the third attempt accepted', () => receiver.of(name).some((r) => r.accepted), 120_000);
    await until(
      'the delivery SUCCEEDED',
      async () => (await deliveries(admin, ep.id))[0]?.status === 'SUCCEEDED',
    );
    const [done] = await deliveries(admin, ep.id);
    expect(done).to.include({ attempts: 3, lastStatusCode: 200, lastError: null, type: 'order.created' });
    const got = receiver.of(name);
    expect(got.map((r) => r.accepted)).to.deep.equal([false, false, true]);
    expect(new Set(got.map((r) => r.webhookId))).to.deep.equal(new Set([done.eventId]));
    expect(got.every((r) => r.verified)).to.equal(true);
    expect(receiver.maxConcurrent).to.equal(1);
    receiver.releaseHeld();
  });

  it('when the receiver answers a redirect, then it is not followed and counts as a failed attempt', async () => {
    const tenant = uniqueTenant();
    const admin = bearer(tenant, '3', 'admin');
    const name = `redirect-${tenant}`;
    const target = `target-${tenant}`;
    receiver.hook(target);
    receiver.hook(name, (n) => (n === 1 ? { redirect: receiver.url(target) } : { status: 200 }));
    const ep = await endpoint(admin, name, { types: ['order.created'] });
    await createOrder(instances[0].url, admin, 'mo-redirect');
    await until(
      'the delivery SUCCEEDED',
      async () => (await deliveries(admin, ep.id))[0]?.status === 'SUCCEEDED',
      120_000,
    );
    const [done] = await deliveries(admin, ep.id);
    expect(done).to.include({ attempts: 2, lastStatusCode: 200 });
    expect(receiver.of(target)).to.deep.equal([]);
    expect(receiver.of(name).map((r) => r.accepted)).to.deep.equal([false, true]);
  });

  it('when the instance running an attempt is SIGKILLed while the receiver holds the request, then another instance attempts it again after the lease, and every event reaches every matching endpoint, never two attempts at once', async function () {
    if (!existsSync('/proc/net/tcp')) this.skip(); // needs Linux /proc to find the sending process by its port
    const tenant = uniqueTenant();
    const admin = bearer(tenant, '4', 'admin');
    const slow = `slow-${tenant}`;
    const fast = `fast-${tenant}`;
    let killed = false;
    receiver.hook(slow, () => (killed ? { status: 200 } : { hold: true }));
    receiver.hook(fast);
    const slowEp = await endpoint(admin, slow);
    const fastEp = await endpoint(admin, fast, { types: ['order.created'] });
    const orders = [];
    for (let i = 0; i < 4; i++) orders.push(await createOrder(instances[i % 2].url, admin, `mo-crash-${i}`));
    // Which instance sent a request the receiver holds: the process whose socket has its source port
    // (a held request times out after 3 s and comes again, so this looks until it finds one open).
    let victim: Instance | undefined;
    await until('an instance holding a request to the slow endpoint', () => {
      const pids = instances.map((x) => x.pid);
      for (const port of receiver.heldPeerPorts()) {
        const pid = pidOfLocalPort(port, pids);
        victim = instances.find((i) => i.pid === pid);
        if (victim) return true;
      }
      return false;
    });
    if (!victim) throw new Error('unreachable');
    victim.kill();
    killed = true;
    await victim.exited;
    // A replacement, so two instances run again (the survivor alone would do too).
    instances.splice(instances.indexOf(victim), 1, await startInstance(ENV));
    // The survivor may still hold a request sent before the kill (the start can take under its 3 s):
    // answered 200 here, it is that delivery's accepted request (its sender does not send it again).
    receiver.releaseHeld();

    const accepted = (name: string) =>
      new Set(
        receiver
          .of(name)
          .filter((r) => r.accepted)
          .map((r) => r.webhookId),
      );
    await until(
      'all four orders at both endpoints',
      () => accepted(slow).size === 4 && accepted(fast).size === 4,
      150_000,
    );
    const ids = new Set(orders.map((o) => o.id));
    expect(
      new Set(
        receiver
          .of(slow)
          .filter((r) => r.accepted)
          .map((r) => (r.body.data as { id: string }).id),
      ),
    ).to.deep.equal(ids);
    expect(
      new Set(
        receiver
          .of(fast)
          .filter((r) => r.accepted)
          .map((r) => (r.body.data as { id: string }).id),
      ),
    ).to.deep.equal(ids);
    expect(
      receiver.received.filter((r) => r.name === slow || r.name === fast).every((r) => r.verified),
    ).to.equal(true);
    expect(receiver.maxConcurrent, 'two attempts of one delivery at once').to.equal(1);
    const url = instances[0].url;
    await until('every delivery SUCCEEDED', async () =>
      [...(await deliveries(admin, slowEp.id, url)), ...(await deliveries(admin, fastEp.id, url))].every(
        (d) => d.status === 'SUCCEEDED',
      ),
    );
  });
});

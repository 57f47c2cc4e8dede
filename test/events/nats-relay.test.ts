import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { expect } from 'chai';
import { connect, type JetStreamManager, type NatsConnection } from 'nats';
import { sqlRows } from '../../core/sql.js';
import { createIsolatedDatabase, type IsolatedDatabase } from '../support/isolated-database.js';
import { natsServerProgram, PrivateNatsServer } from '../support/nats-server.js';
import { createOrder } from '../support/orders.js';
import { payUntilFinal } from '../support/payment-calls.js';
import { type Instance, spawnInstance, startInstance } from '../support/processes.js';
import { stablePort } from '../support/stable-port.js';
import { bearer, idempotencyKey, uniqueTenant } from '../support/tokens.js';

/**
 * The NATS relay (CONTRACT section 12 "Bus"; events/nats-relay.ts) in real instances, publishing to
 * a NATS server of this test's own: the test takes it down and brings it back, and its stream
 * starts empty. (The machine's shared stream would not do: event ids are positions in a database,
 * and a fresh test database repeats the ids of the last run, which that stream's duplicate window
 * would drop as duplicates.) The events come from real orders and payments on an instance without
 * NATS_URL; the relay runs in instances with it, over a database of this file's own.
 */
const STREAM = 'EVENTS';

interface StoredEvent {
  seq: number;
  subject: string;
  msgId: string;
  bodyId: string;
}

describe('events: the NATS relay publishes the outbox to JetStream (real instances, a private nats-server)', function () {
  this.timeout(180_000);
  let nats: PrivateNatsServer | undefined;
  let storeDir: string | undefined;
  let db: IsolatedDatabase;
  let traffic: Instance;
  let admin: NatsConnection | undefined;
  let manager: JetStreamManager;
  const relays: Instance[] = [];

  before(async function () {
    const program = natsServerProgram();
    if (!program) {
      console.log(
        '    skipped: no nats-server program (PATH, /usr/sbin, NATS_SERVER_BIN): these tests run a NATS server of their own',
      );
      this.skip();
    }
    storeDir = await mkdtemp(path.join(os.tmpdir(), 'nats-relay-'));
    nats = new PrivateNatsServer(program, await stablePort(), storeDir);
    await nats.start();
    admin = await connect({ servers: nats.url, timeout: 5000, maxReconnectAttempts: -1 });
    manager = await admin.jetstreamManager();
    db = await createIsolatedDatabase('nats_relay');
    traffic = await startInstance({ DATABASE_URL: db.url });
  });

  after(async () => {
    for (const r of relays) {
      r.kill();
      await r.exited;
    }
    if (traffic) {
      traffic.kill();
      await traffic.exited;
    }
    await admin?.close().catch(() => undefined);
    await nats?.stop();
    if (storeDir) await rm(storeDir, { recursive: true, force: true });
    await db?.drop();
  });

  const relayEnv = (extra: Record<string, string> = {}) => ({
    DATABASE_URL: db.url,
    NATS_URL: nats?.url ?? '',
    LOG_LEVEL: 'info',
    ...extra,
  });
  const startRelay = async (extra: Record<string, string> = {}) => {
    const r = await startInstance(relayEnv(extra));
    relays.push(r);
    return r;
  };

  /** Orders (some paid) of one tenant, through the instance without NATS. */
  async function makeEvents(tenant: string, orders: number): Promise<void> {
    const auth = bearer(tenant, '870000001');
    for (let i = 0; i < orders; i++) {
      const merchantOrderNo = `mo-${i}`;
      await createOrder(traffic.url, auth, merchantOrderNo, '12.50');
      if (i % 3 === 2) continue;
      const { final } = await payUntilFinal(traffic.url, auth, idempotencyKey(), {
        merchantOrderNo,
        amount: '12.50',
      });
      expect(final.status, final.text).to.equal(201);
    }
  }

  /** The tenant's event ids in feed order, from the outbox. */
  async function outbox(tenant: string): Promise<string[]> {
    const rows = await sqlRows<{ id: string }>(
      db.sequelize,
      'SELECT id FROM events WHERE tenant_id = $1 ORDER BY tx_id, seq',
      [tenant],
    );
    return rows.map((r) => r.id);
  }

  /** How many of the tenant's events lie after the relay's position (not yet marked published). */
  async function unmarked(tenant: string): Promise<number> {
    const rows = await sqlRows<{ n: number }>(
      db.sequelize,
      `SELECT count(*)::int AS n FROM events e
        WHERE e.tenant_id = $1
          AND (e.tx_id, e.seq) > coalesce((SELECT (r.tx_id, r.seq) FROM event_relays r WHERE r.name = 'nats'), ('0'::xid8, 0::bigint))`,
      [tenant],
    );
    return rows[0].n;
  }

  /** Every message of the stream, in stream order. */
  async function stored(): Promise<StoredEvent[]> {
    const info = await manager.streams.info(STREAM).catch(() => undefined);
    if (!info || info.state.messages === 0) return [];
    const out: StoredEvent[] = [];
    for (let seq = info.state.first_seq; seq <= info.state.last_seq; seq++) {
      const m = await manager.streams.getMessage(STREAM, { seq });
      out.push({
        seq,
        subject: m.subject,
        msgId: m.header.get('Nats-Msg-Id'),
        bodyId: (m.json() as { id: string }).id,
      });
    }
    return out;
  }

  const ofTenant = (all: StoredEvent[], tenant: string) =>
    all.filter((m) => m.subject.startsWith(`events.${tenant}.`));

  async function until(what: string, cond: () => Promise<boolean>, withinMs = 90_000, instance?: Instance) {
    const deadline = Date.now() + withinMs;
    while (!(await cond())) {
      if (Date.now() > deadline)
        throw new Error(
          `timed out waiting for ${what}${instance ? `\n${instance.output().slice(-4000)}` : ''}`,
        );
      await sleep(200);
    }
  }

  /** The stream holds each of the tenant's events exactly once, in feed order, on its own subject. */
  async function expectRelayed(tenant: string): Promise<void> {
    const ids = await outbox(tenant);
    expect(ids.length, 'events written').to.be.greaterThan(3);
    const mine = ofTenant(await stored(), tenant);
    expect(mine.map((m) => m.msgId)).to.deep.equal(ids);
    for (const m of mine) {
      expect(m.bodyId).to.equal(m.msgId);
      expect(m.subject).to.match(
        new RegExp(`^events\\.${tenant}\\.(order\\.(created|paid)|payment\\.(succeeded|failed))$`),
      );
    }
  }

  it('when orders and payments of two tenants commit while the relay runs, then the stream holds each event once, in feed order per tenant, with Nats-Msg-Id = the event id', async () => {
    const relay = await startRelay();
    const tenants = [uniqueTenant('nats-a'), uniqueTenant('nats-b')];
    await Promise.all(tenants.map((t) => makeEvents(t, 5)));
    for (const t of tenants)
      await until(`the relay to pass ${t}'s events`, async () => (await unmarked(t)) === 0, 90_000, relay);
    for (const t of tenants) await expectRelayed(t);
    const all = await stored();
    expect(new Set(all.map((m) => m.msgId)).size, 'ids stored more than once').to.equal(all.length);
    const info = await manager.streams.info(STREAM);
    expect(info.config.subjects).to.deep.equal(['events.>']);
    expect(info.config.duplicate_window).to.equal(10 * 60_000 * 1_000_000);
    expect(await relay.stop()).to.equal(0);
  });

  it('when the relay dies between publishing a batch and marking it (failpoint events.relay.after-publish=sigkill), then after a restart the stream still holds each event exactly once', async () => {
    const tenant = uniqueTenant('nats-crash');
    await makeEvents(tenant, 6);
    const written = (await outbox(tenant)).length;
    const crashing = await spawnInstance(relayEnv({ FAILPOINTS: 'events.relay.after-publish=sigkill@1' }));
    relays.push(crashing);
    await crashing.exited;
    expect(crashing.output()).to.contain('failpoint events.relay.after-publish fired: sigkill');
    expect(crashing.child.signalCode).to.equal('SIGKILL');
    // It died after JetStream stored the batch (all of the events, or those below the feed's
    // horizon at that moment) and before the position moved past any of it.
    const published = ofTenant(await stored(), tenant).length;
    expect(published, 'published before the crash').to.be.within(1, written);
    expect(await unmarked(tenant), 'marked before the crash').to.equal(written);

    const restarted = await startRelay();
    await until(
      'the restarted relay to pass the events',
      async () => (await unmarked(tenant)) === 0,
      90_000,
      restarted,
    );
    await expectRelayed(tenant);
    // The republish happened and JetStream dropped it as a duplicate (the relay says how many).
    await until(
      'the relay to report the duplicates',
      async () => /published events again/.test(restarted.output()),
      30_000,
      restarted,
    );
  });

  it('when NATS is unreachable for a while and comes back, then the events written meanwhile wait in the outbox and are all published, once, in order', async () => {
    const relay = relays.at(-1);
    if (!relay || relay.child.exitCode !== null) throw new Error('the previous test left no relay running');
    await nats?.stop();
    const tenant = uniqueTenant('nats-down');
    await makeEvents(tenant, 5);
    await until(
      'the relay to find NATS unreachable',
      async () => /NATS unreachable/.test(relay.output()),
      60_000,
      relay,
    );
    // Nothing was marked while NATS was down.
    expect(await unmarked(tenant)).to.equal((await outbox(tenant)).length);
    await nats?.start();
    await until('the relay to pass the events', async () => (await unmarked(tenant)) === 0, 90_000, relay);
    await expectRelayed(tenant);
    expect(relay.output()).to.match(/NATS reachable again/);
  });
});

import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import { connect, type JetStreamManager, type NatsConnection } from 'nats';
import { NatsBus } from '../../events/nats-bus.js';
import type { OutgoingEvent } from '../../events/webhook-sender.js';

const servers = process.env.NATS_URL || 'nats://127.0.0.1:4222';
// Unique per run: the tests never touch a real EVENTS stream nor its `events.>` subjects.
const run = randomBytes(4).toString('hex');
const stream = `EVENTS_TEST_${run}`;
const subjectPrefix = `events_test_${run}`;

const event = (id: string): OutgoingEvent => ({
  id,
  type: 'payment.succeeded',
  createdAt: new Date().toISOString(),
  data: { id: 'pay_1', status: 'SUCCEEDED' },
});

describe('NATS JetStream publisher (CONTRACT section 12)', () => {
  let admin: NatsConnection | undefined;
  let manager: JetStreamManager;
  const buses: NatsBus[] = [];
  const open = async () => {
    const bus = await NatsBus.connect({ servers, stream, subjectPrefix, maxAgeMs: 3_600_000 });
    buses.push(bus);
    return bus;
  };
  const storedOn = async (subject: string) =>
    (await manager.streams.info(stream, { subjects_filter: subject })).state.subjects?.[subject] ?? 0;

  before(async function () {
    try {
      admin = await connect({ servers: servers.split(','), timeout: 2000 });
      manager = await admin.jetstreamManager();
    } catch (err) {
      console.log(
        `    skipped: no NATS server with JetStream answers at ${servers} (${(err as Error).message})`,
      );
      this.skip();
    }
  });

  after(async () => {
    for (const bus of buses) await bus.close();
    if (admin) {
      await manager.streams.delete(stream).catch(() => undefined);
      await admin.close();
    }
  });

  it('when the stream is missing, then connect creates it with the prefix subjects; a second connect keeps it', async () => {
    await open();
    const created = await manager.streams.info(stream);
    expect(created.config.subjects).to.deep.equal([`${subjectPrefix}.>`]);
    expect(created.config.max_age).to.equal(3_600_000 * 1_000_000);
    expect(created.config.duplicate_window).to.equal(120_000 * 1_000_000);
    await open();
    expect((await manager.streams.info(stream)).created).to.equal(created.created);
  });

  it('when the same event id is published twice, then the stream holds it once and the second ack says duplicate', async () => {
    const bus = await open();
    const tenant = `t${randomBytes(4).toString('hex')}`;
    const sent = event(`evt_${randomBytes(6).toString('hex')}`);
    const first = await bus.publish(tenant, sent);
    const second = await bus.publish(tenant, sent);
    expect(first).to.deep.include({ stream, duplicate: false });
    expect(second).to.deep.include({ stream, duplicate: true, seq: first.seq });
    expect(await storedOn(`${subjectPrefix}.${tenant}.payment.succeeded`)).to.equal(1);
  });

  it('when the publisher crashed after publishing and before marking, then re-publishing after a reconnect stores nothing new', async () => {
    const tenant = `t${randomBytes(4).toString('hex')}`;
    const sent = event(`evt_${randomBytes(6).toString('hex')}`);
    const crashed = await open();
    await crashed.publish(tenant, sent);
    await crashed.close();
    const restarted = await open();
    const again = await restarted.publish(tenant, sent);
    expect(again.duplicate).to.equal(true);
    const other = await restarted.publish(tenant, event(`evt_${randomBytes(6).toString('hex')}`));
    expect(other.duplicate).to.equal(false);
    expect(await storedOn(`${subjectPrefix}.${tenant}.payment.succeeded`)).to.equal(2);
  });

  it('the stored message carries the event as JSON and Nats-Msg-Id = the event id', async () => {
    const bus = await open();
    const tenant = `t${randomBytes(4).toString('hex')}`;
    const sent = event(`evt_${randomBytes(6).toString('hex')}`);
    const { seq } = await bus.publish(tenant, sent);
    const stored = await manager.streams.getMessage(stream, { seq });
    expect(stored.subject).to.equal(`${subjectPrefix}.${tenant}.payment.succeeded`);
    expect(stored.header.get('Nats-Msg-Id')).to.equal(sent.id);
    expect(stored.json()).to.deep.equal(sent);
  });

  it('when a stream of that name holds other subjects, then connect refuses with a clear reason', async () => {
    const other = `${stream}_OTHER`;
    await manager.streams.add({ name: other, subjects: [`${subjectPrefix}_other.>`] });
    try {
      await NatsBus.connect({ servers, stream: other, subjectPrefix: `${subjectPrefix}_mine` }).then(
        () => expect.fail('connected'),
        (err: Error) => expect(err.message).to.match(/exists without the subjects/),
      );
    } finally {
      await manager.streams.delete(other);
    }
  });

  it('a tenant id that is not one subject token is refused before publishing', async () => {
    const bus = await open();
    for (const tenant of ['a.b', '*', '>', 'a b', ''])
      expect(() => bus.subjectFor(tenant, 'order.created'), tenant).to.throw(/subject token/);
  });
});

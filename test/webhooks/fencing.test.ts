import { expect } from 'chai';
import pino from 'pino';
import type { Sequelize } from 'sequelize';
import type { Config } from '../../core/config.js';
import { createSequelize } from '../../core/database.js';
import { sqlRows } from '../../core/sql.js';
import { newWebhookSecret } from '../../events/webhook-sender.js';
import { SecretBox } from '../../events/webhook-store.js';
import { WebhookDeliveries } from '../../events/webhook-worker.js';
import { migrate } from '../../models/migrate.js';
import { stopSharedServer, testConfig } from '../support/server.js';
import { uniqueTenant } from '../support/tokens.js';
import { Receiver, retireEndpoints, until } from './receiver.js';

/**
 * The worker's claim and its fenced result, in process, without a running server (the shared one is
 * stopped: its dispatcher would take the deliveries). The delivery under test is made the most
 * overdue one (next_attempt_at in 2000), so a claim of one takes it before any other test's leftover.
 */
describe('webhooks: the claim and the fenced result of an attempt', function () {
  this.timeout(60_000);
  const receiver = new Receiver();
  let settings: Config;
  let sequelize: Sequelize;

  before(async () => {
    settings = testConfig({ WEBHOOK_TIMEOUT_MS: '3000', WEBHOOK_RETRY_BASE_MS: '300' });
    await stopSharedServer();
    sequelize = createSequelize(settings.DATABASE_URL ?? '', 4);
    await migrate(sequelize);
    await receiver.start();
  });

  after(async () => {
    await receiver.stop();
    await retireEndpoints(receiver.port);
    await sequelize.close();
  });

  /** An endpoint at the receiver and one order event for it: returns the delivery's id. */
  async function oneDelivery(name: string): Promise<{ deliveryId: string; endpointId: string }> {
    const tenant = uniqueTenant();
    const endpointId = `we_test_${tenant}`;
    const secret = newWebhookSecret();
    receiver.setSecret(name, secret);
    await sqlRows(
      sequelize,
      'INSERT INTO webhook_endpoints (id, tenant_id, url, secret_ciphertext) VALUES ($1, $2, $3, $4)',
      [endpointId, tenant, receiver.url(name), new SecretBox(settings).seal(endpointId, secret)],
    );
    await sqlRows(
      sequelize,
      `INSERT INTO orders (id, tenant_id, user_id, merchant_order_no, amount, currency, status, created_at, updated_at)
       VALUES (nextval('orders_id_seq'), $1, 1, 'fenced', 1, 'USD', 'CREATED', now(), now())`,
      [tenant],
    );
    const [row] = await sqlRows<{ id: string }>(
      sequelize,
      `UPDATE webhook_deliveries SET next_attempt_at = '2000-01-01T00:00:00Z' WHERE endpoint_id = $1 RETURNING id::text AS id`,
      [endpointId],
    );
    return { deliveryId: row.id, endpointId };
  }

  const state = async (id: string) =>
    (
      await sqlRows<{
        status: string;
        attempts: number;
        lease_owner: string | null;
        next_attempt_at: Date | null;
      }>(
        sequelize,
        'SELECT status, attempts, lease_owner::text AS lease_owner, next_attempt_at FROM webhook_deliveries WHERE id = $1',
        [id],
      )
    )[0];

  /** FAILED after `attempts` made (the receiver got each), no next attempt, its last answer (a 500) kept. */
  async function expectFailedAfter(deliveryId: string, name: string, attempts: number) {
    expect(await state(deliveryId)).to.include({
      status: 'FAILED',
      attempts,
      next_attempt_at: null,
      lease_owner: null,
    });
    const [row] = await sqlRows<{ last_status_code: number; last_error: string }>(
      sequelize,
      'SELECT last_status_code, last_error FROM webhook_deliveries WHERE id = $1',
      [deliveryId],
    );
    expect(row).to.deep.equal({ last_status_code: 500, last_error: 'HTTP 500 from the receiver' });
    expect(receiver.of(name)).to.have.length(attempts);
  }

  const worker = () =>
    new WebhookDeliveries({ sequelize, logger: pino({ level: 'silent' }), settings, maxInFlight: 1 });

  it('when a claimed attempt is running, then another claim does not take its delivery; when its lease was taken over, then its late result is refused', async () => {
    const name = `fence-${uniqueTenant()}`;
    receiver.hook(name, (n) => (n === 1 ? { hold: true } : { status: 200 }));
    const { deliveryId } = await oneDelivery(name);
    const first = worker();
    expect(await first.dispatch()).to.equal(1);
    await until('the attempt is held by the receiver', () => receiver.heldCount() === 1);
    const claimed = await state(deliveryId);
    expect(claimed.lease_owner).to.be.a('string');
    expect(claimed.next_attempt_at?.getTime()).to.be.greaterThan(Date.now());

    // Another instance's dispatch while the lease runs: the delivery is not due, it is not taken.
    const second = worker();
    await second.dispatch();
    await second.drain();
    expect((await state(deliveryId)).lease_owner).to.equal(claimed.lease_owner);

    // As after the lease ended and another instance claimed it: a new owner token.
    await sqlRows(sequelize, 'UPDATE webhook_deliveries SET lease_owner = gen_random_uuid() WHERE id = $1', [
      deliveryId,
    ]);
    receiver.releaseHeld(200);
    await first.drain();
    const after = await state(deliveryId);
    expect(after.status).to.equal('PENDING');
    expect(after.attempts).to.equal(0);
    expect(after.lease_owner).not.to.equal(claimed.lease_owner);
  });

  it('when an attempt fails, then attempts grows and the next one is scheduled by the back-off; when it succeeds, then SUCCEEDED', async () => {
    const name = `sched-${uniqueTenant()}`;
    receiver.hook(name, (n) => (n === 1 ? { status: 503 } : { status: 200 }));
    const { deliveryId } = await oneDelivery(name);
    const w = worker();
    expect(await w.dispatch()).to.equal(1);
    await w.drain();
    const failed = await state(deliveryId);
    expect(failed).to.include({ status: 'PENDING', attempts: 1, lease_owner: null });
    // 300 ms ± 20 % after the failure (WEBHOOK_RETRY_BASE_MS scales the contract's 5 s).
    const wait = (failed.next_attempt_at?.getTime() ?? 0) - Date.now();
    expect(wait).to.be.lessThan(400);
    await sqlRows(
      sequelize,
      `UPDATE webhook_deliveries SET next_attempt_at = '2000-01-01T00:00:00Z' WHERE id = $1`,
      [deliveryId],
    );
    expect(await w.dispatch()).to.equal(1);
    await w.drain();
    expect(await state(deliveryId)).to.include({
      status: 'SUCCEEDED',
      attempts: 2,
      lease_owner: null,
      next_attempt_at: null,
    });
    expect(receiver.of(name).every((r) => r.verified)).to.equal(true);
  });

  it('when the last allowed attempt (WEBHOOK_MAX_ATTEMPTS) fails, then the delivery is FAILED with its last result and no next attempt', async () => {
    const name = `last-${uniqueTenant()}`;
    receiver.hook(name, () => ({ status: 500 }));
    const { deliveryId } = await oneDelivery(name);
    const w = new WebhookDeliveries({
      sequelize,
      logger: pino({ level: 'silent' }),
      settings: { ...settings, WEBHOOK_MAX_ATTEMPTS: 2 },
      maxInFlight: 1,
    });
    expect(await w.dispatch()).to.equal(1);
    await w.drain();
    expect(await state(deliveryId)).to.include({ status: 'PENDING', attempts: 1 });
    await sqlRows(
      sequelize,
      `UPDATE webhook_deliveries SET next_attempt_at = '2000-01-01T00:00:00Z' WHERE id = $1`,
      [deliveryId],
    );
    expect(await w.dispatch()).to.equal(1);
    await w.drain();
    await expectFailedAfter(deliveryId, name, 2);
  });

  it("when WEBHOOK_MAX_ATTEMPTS is lowered below a delivery's attempts (a restart), then its next claim fails it without sending, keeping its last result", async () => {
    const name = `lowered-${uniqueTenant()}`;
    receiver.hook(name, () => ({ status: 500 }));
    const { deliveryId } = await oneDelivery(name);
    const withMax = (max: number) =>
      new WebhookDeliveries({
        sequelize,
        logger: pino({ level: 'silent' }),
        settings: { ...settings, WEBHOOK_MAX_ATTEMPTS: max },
        maxInFlight: 1,
      });
    const before = withMax(5);
    for (const attempts of [1, 2]) {
      expect(await before.dispatch()).to.equal(1);
      await before.drain();
      expect(await state(deliveryId)).to.include({ status: 'PENDING', attempts });
      await sqlRows(
        sequelize,
        `UPDATE webhook_deliveries SET next_attempt_at = '2000-01-01T00:00:00Z' WHERE id = $1`,
        [deliveryId],
      );
    }
    const lowered = withMax(2);
    expect(await lowered.dispatch()).to.equal(1);
    await lowered.drain();
    await expectFailedAfter(deliveryId, name, 2);
  });

  it('when the endpoint is deleted, then its delivery is not claimed', async () => {
    const name = `deleted-${uniqueTenant()}`;
    receiver.hook(name);
    const { deliveryId, endpointId } = await oneDelivery(name);
    await sqlRows(sequelize, `UPDATE webhook_endpoints SET status = 'DELETED' WHERE id = $1`, [endpointId]);
    const w = worker();
    await w.dispatch();
    await w.drain();
    expect((await state(deliveryId)).lease_owner).to.equal(null);
    expect(receiver.of(name)).to.deep.equal([]);
  });
});

import { setTimeout as sleep } from 'node:timers/promises';
import { expect } from 'chai';
import type { Sequelize } from 'sequelize';
import { createSequelize } from '../../core/database.js';
import { sqlRows } from '../../core/sql.js';
import { http } from '../support/http.js';
import { createOrder } from '../support/orders.js';
import { type Instance, startInstance } from '../support/processes.js';
import { stopSharedServer, testConfig } from '../support/server.js';
import { bearer, uniqueTenant } from '../support/tokens.js';
import { Receiver, retireEndpoints, until } from './receiver.js';

/**
 * A graceful stop (SIGTERM) lets the webhook attempts the instance started finish and records their
 * result before the pool closes: an attempt cut off would stay leased, and be sent again by another
 * instance after its lease, although the receiver had taken it. One instance only, so the attempt the
 * receiver holds is surely its own; a 20 s attempt time-out, so the hold ends by the release below.
 */
describe('webhooks: a graceful stop waits for the attempts in flight', function () {
  this.timeout(180_000);
  const receiver = new Receiver();
  let instance: Instance | undefined;
  let sequelize: Sequelize;

  before(async () => {
    await stopSharedServer();
    await receiver.start();
    sequelize = createSequelize(testConfig().DATABASE_URL ?? '', 2);
  });

  after(async () => {
    instance?.kill();
    await instance?.exited;
    await receiver.stop();
    await retireEndpoints(receiver.port);
    await sequelize.close();
  });

  it('when an instance gets SIGTERM while the receiver holds its attempt, then it exits 0 only after the answer is recorded: the delivery SUCCEEDED at its first attempt', async () => {
    const started = await startInstance({
      WEBHOOK_TIMEOUT_MS: '20000',
      SHUTDOWN_TIMEOUT_MS: '30000',
      RECOVERER_INTERVAL_MS: '3600000',
    });
    instance = started;
    const tenant = uniqueTenant();
    const admin = bearer(tenant, '1', 'admin');
    const name = `sigterm-${tenant}`;
    receiver.hook(name, (n) => (n === 1 ? { hold: true } : { status: 200 }));
    const created = await http('POST', '/api/v1/webhook-endpoints', {
      baseUrl: started.url,
      headers: admin,
      body: { url: receiver.url(name), types: ['order.created'] },
    });
    expect(created.status, created.text).to.equal(201);
    receiver.setSecret(name, created.body.data.secret);
    await createOrder(started.url, admin, 'mo-sigterm');
    await until('the attempt held by the receiver', () => receiver.of(name).length === 1);

    const exited = started.stop();
    // The stop is under way (requests drained, jobs stopped) when the receiver answers, 4 s later; a
    // stop that did not wait for the attempt has closed its pool and exited by then (fb26d90 did), and
    // the delivery stayed PENDING and leased. The 4 s are far inside both bounds of the wait (the
    // attempt's 20 s time-out, SHUTDOWN_TIMEOUT_MS 30 s), so a stop that waits always records it.
    await sleep(4000);
    receiver.releaseHeld(200);
    expect(await exited, started.output()).to.equal(0);

    const rows = await sqlRows<{ status: string; attempts: number; last_status_code: number | null }>(
      sequelize,
      'SELECT status, attempts, last_status_code FROM webhook_deliveries WHERE endpoint_id = $1',
      [created.body.data.id],
    );
    expect(rows).to.deep.equal([{ status: 'SUCCEEDED', attempts: 1, last_status_code: 200 }]);
    expect(receiver.of(name)).to.have.length(1);
  });
});

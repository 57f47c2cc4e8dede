import { setTimeout as sleep } from 'node:timers/promises';
import { expect } from 'chai';
import pg from 'pg';
import { createOrder } from '../support/orders.js';
import { killAll, startInstance } from '../support/processes.js';
import { bearer, uniqueTenant } from '../support/tokens.js';

describe('events: retention (EVENT_RETENTION_DAYS)', function () {
  this.timeout(120000);
  after(killAll);

  it('when an event is older than the retention, then the background purge deletes it and keeps the younger ones', async () => {
    const tenant = uniqueTenant('retain');
    const auth = bearer(tenant, '830000001');
    const instance = await startInstance({
      PURGE_INTERVAL_MS: '300',
      EVENT_RETENTION_DAYS: '2',
      RECOVERER_INTERVAL_MS: '3600000',
    });
    await createOrder(instance.url, auth, 'old-1');
    await createOrder(instance.url, auth, 'young-1');
    const db = new pg.Client({ connectionString: process.env.TEST_DATABASE_URL });
    await db.connect();
    try {
      const age = async (merchantOrderNo: string, days: number) =>
        db.query(
          `UPDATE events SET created_at = now() - make_interval(days => $3) WHERE tenant_id = $1 AND row->>'merchant_order_no' = $2`,
          [tenant, merchantOrderNo, days],
        );
      await age('old-1', 3);
      await age('young-1', 1);
      const left = async () =>
        (
          await db.query(
            `SELECT row->>'merchant_order_no' AS m FROM events WHERE tenant_id = $1 ORDER BY seq`,
            [tenant],
          )
        ).rows.map((r) => r.m as string);
      const deadline = Date.now() + 60000;
      while ((await left()).includes('old-1')) {
        if (Date.now() > deadline) throw new Error(`the old event was never purged:\n${instance.output()}`);
        await sleep(200);
      }
      expect(await left()).to.deep.equal(['young-1']);
    } finally {
      await db.end();
    }
  });
});

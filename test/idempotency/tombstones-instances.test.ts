// Issue 26: a purged key is never executed again, across a real purge and two real instances.
import { expect } from 'chai';
import { http } from '../support/http.js';
import { type Instance, killAll, startInstance } from '../support/processes.js';
import { sharedServer } from '../support/server.js';
import { bearer, idempotencyKey, uniqueTenant } from '../support/tokens.js';
import { expectFailure, orderScope, ordersOf, recordsOf, sql, until } from './support.js';

describe('tombstones across two real server processes and the real purge job', function () {
  this.timeout(120000);
  let purging: Instance;
  let other: Instance;

  before(async () => {
    await sharedServer(); // migrations applied once before the processes start
    // The first instance purges often; the second would not purge within the test.
    purging = await startInstance({ PURGE_INTERVAL_MS: '200' });
    other = await startInstance({ PURGE_INTERVAL_MS: '3600000' });
  });
  after(killAll);

  it('when instance 1 created an order whose record then expired and its purge job purged it, then instance 2 answers that key 409 40905 and writes nothing', async () => {
    const tenant = uniqueTenant();
    const user = '860000001';
    const key = idempotencyKey();
    const headers = { ...bearer(tenant, user), 'Idempotency-Key': key };
    const body = { merchantOrderNo: 'mo-inst', amount: '3.00' };
    const first = await http('POST', '/api/v1/orders', { headers, body, baseUrl: purging.url });
    expect(first.status, first.text).to.equal(201);
    const scope = orderScope(tenant, user, key);
    await sql(
      `UPDATE idempotency_records SET expires_at = now() - interval '1 minute' WHERE scope_key = $1`,
      [scope],
    );
    await until(async () => (await recordsOf(tenant)).length === 0, 'the purge job purged the record', 30000);

    for (const b of [body, { merchantOrderNo: 'mo-inst-2', amount: '4.00' }]) {
      const again = await http('POST', '/api/v1/orders', { headers, body: b, baseUrl: other.url });
      expectFailure(again, 409, 40905);
      expect(again.headers.get('retry-after')).to.equal(null);
    }
    expect((await ordersOf(tenant)).map((o) => o.merchant_order_no)).to.deep.equal(['mo-inst']);
    expect(await recordsOf(tenant)).to.deep.equal([]);

    // A new key is a new operation: the business key decides (the order exists: 40904).
    const fresh = await http('POST', '/api/v1/orders', {
      headers: { ...headers, 'Idempotency-Key': idempotencyKey() },
      body,
      baseUrl: other.url,
    });
    expectFailure(fresh, 409, 40904);
  });
});

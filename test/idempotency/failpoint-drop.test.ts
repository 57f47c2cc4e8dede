import { expect } from 'chai';
import { http } from '../support/http.js';
import { type Instance, startInstance } from '../support/processes.js';
import { sharedServer } from '../support/server.js';
import { bearer, idempotencyKey, uniqueTenant } from '../support/tokens.js';
import { ordersOf } from './support.js';

describe('failpoint action drop: the database connections of an instance are cut mid-transaction', function () {
  this.timeout(60000);
  let instance: Instance;

  before(async () => {
    await sharedServer(); // migrations applied before the process starts
    instance = await startInstance({ FAILPOINTS: 'local.after-write=drop@1' });
  });
  after(async () => {
    await instance?.stop();
  });

  it('when the connection of a Mode A transaction is cut after the business write, then 503 with Retry-After, nothing is kept, and the retry with the same key creates the order once', async () => {
    const tenant = uniqueTenant('drop');
    const headers = { ...bearer(tenant, '890000020'), 'Idempotency-Key': idempotencyKey() };
    const body = { merchantOrderNo: 'mo-drop', amount: '1.00' };
    const cut = await http('POST', '/api/v1/orders', { baseUrl: instance.url, headers, body });
    expect(cut.status, cut.text).to.equal(503);
    expect(cut.headers.get('retry-after')).to.not.equal(null);
    expect(await ordersOf(tenant)).to.have.length(0);
    // The instance's own lines travel with a failure of the retry (a rehearsal once saw ECONNRESET here).
    const retry = await http('POST', '/api/v1/orders', { baseUrl: instance.url, headers, body }).catch(
      (err: unknown) => {
        throw new Error(`retry failed: ${String(err)}; the instance said:\n${instance.output()}`);
      },
    );
    expect(retry.status, retry.text).to.equal(201);
    expect(await ordersOf(tenant)).to.have.length(1);
  });
});

// Issue 14, the server's half: a 202's Retry-After says when trying again is useful. For the first
// request of a payment whose gateway outcome stayed unknown, that is the time left on its own lease
// (the charge's time-out already spent part of it), not the whole lease as before.
import { expect } from 'chai';
import { type GatewaySlot, startGatewaySlot } from '../support/gateway-slot.js';
import { createIsolatedDatabase, type IsolatedDatabase } from '../support/isolated-database.js';
import { createOrder } from '../support/orders.js';
import { pay, shortLeaseEnv } from '../support/payment-calls.js';
import { type Instance, startInstance } from '../support/processes.js';
import { bearer, idempotencyKey, uniqueTenant } from '../support/tokens.js';

const LEASE_S = 20;
const GATEWAY_TIMEOUT_S = 2;

describe('payments: Retry-After of a 202 counts down the lease', function () {
  this.timeout(60000);
  let db: IsolatedDatabase;
  let slot: GatewaySlot;
  let instance: Instance;

  before(async () => {
    db = await createIsolatedDatabase('retryafter');
    slot = await startGatewaySlot();
    await slot.simulator();
    instance = await startInstance(
      shortLeaseEnv(db.url, slot.url, {
        IDEMPOTENCY_LEASE_MS: String(LEASE_S * 1000),
        GATEWAY_TIMEOUT_MS: String(GATEWAY_TIMEOUT_S * 1000),
        RECOVERER_INTERVAL_MS: '60000',
      }),
    );
  });
  after(async () => {
    await instance?.stop();
    await slot?.close();
    await db?.drop();
  });

  it('when the charge times out and the query finds nothing, then the 202 says the lease time left (at most the lease less the time-out of the charge), at least 1 s', async () => {
    const tenant = uniqueTenant('ra');
    const auth = bearer(tenant, '870000001');
    await createOrder(instance.url, auth, 'mo-ra', '4.00');
    await slot.blackHole();
    const res = await pay(instance.url, auth, idempotencyKey(), { merchantOrderNo: 'mo-ra', amount: '4.00' });
    expect(res.status, res.text).to.equal(202);
    const retryAfter = Number(res.headers.get('retry-after'));
    expect(Number.isInteger(retryAfter), String(retryAfter)).to.equal(true);
    expect(retryAfter).to.be.at.least(1);
    expect(retryAfter).to.be.at.most(LEASE_S - GATEWAY_TIMEOUT_S);
  });
});

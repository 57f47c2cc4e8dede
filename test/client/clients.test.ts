// The shipped clients (client/) against real instances: a payment survives a gateway outage (503s),
// a slow gateway (202s) and the instance it talks to being SIGKILLed behind nginx, on both
// transports, with exactly one charge and one key per call.
import { setTimeout as sleep } from 'node:timers/promises';
import { expect } from 'chai';
import { createServiceClient, newIdempotencyKey, StillProcessingError } from '../../client/index.js';
import { findNginx, type Nginx, startNginx } from '../../deploy/nginx.js';
import { type GatewaySlot, startGatewaySlot } from '../support/gateway-slot.js';
import { createIsolatedDatabase, type IsolatedDatabase } from '../support/isolated-database.js';
import { createOrder } from '../support/orders.js';
import { shortLeaseEnv } from '../support/payment-calls.js';
import { type Instance, startInstance } from '../support/processes.js';
import { tokenFor, uniqueTenant } from '../support/tokens.js';

type Transport = 'trpc' | 'rest';

describe('typed clients (client/): one key per call, retried safely to the final answer', function () {
  this.timeout(120000);
  let db: IsolatedDatabase;
  let slot: GatewaySlot;
  let instance: Instance;

  before(async () => {
    db = await createIsolatedDatabase('clients');
    slot = await startGatewaySlot();
    await slot.simulator();
    instance = await startInstance(shortLeaseEnv(db.url, slot.url));
  });
  afterEach(async () => {
    if (slot.mode !== 'simulator') await slot.simulator();
    await slot.client.setFaults({});
  });
  after(async () => {
    await instance?.stop();
    await slot?.close();
    await db?.drop();
  });

  async function setup(tag: string) {
    const tenant = uniqueTenant(tag);
    const user = '890000030';
    const token = tokenFor(tenant, user, 'user');
    await createOrder(instance.url, { Authorization: `Bearer ${token}` }, 'mo-c', '15.00');
    return { tenant, user, token, body: { merchantOrderNo: 'mo-c', amount: '15.00' } };
  }

  /** Pays through the client of the given transport; the payment's transfer object. */
  /** What the client saw, attempt by attempt (status, 0 = no answer; processing = a 202). */
  let seen: Array<{ key: string | null; status: number; processing: boolean }> = [];

  async function payWith(
    transport: Transport,
    url: string,
    token: string,
    body: { merchantOrderNo: string; amount: string },
  ) {
    seen = [];
    const onAttempt = (a: (typeof seen)[number]) => {
      seen.push(a);
    };
    const { trpc, rest } = createServiceClient({
      url,
      token,
      retry: { deadlineMs: 30000, baseDelayMs: 100, onAttempt },
    });
    if (transport === 'trpc') {
      const result = (await trpc.payments.create.mutate(body)) as {
        data: { id: string; paymentNo: string; status: string };
      };
      return result.data;
    }
    const { data, error, response } = await rest.POST('/api/v1/payments', {
      params: { header: { 'Idempotency-Key': newIdempotencyKey() } },
      body,
    });
    expect(error, JSON.stringify(error)).to.equal(undefined);
    expect(response.status).to.equal(201);
    return (data as { data: { id: string; paymentNo: string; status: string } }).data;
  }

  async function keysOf(tenant: string, user: string): Promise<string[]> {
    const [rows] = await db.sequelize.query(
      `SELECT scope_key FROM idempotency_records WHERE user_scope = $1 AND operation = 'payments.create'`,
      { bind: [`${tenant}:${user}`] },
    );
    return (rows as Array<{ scope_key: string }>).map((r) => r.scope_key);
  }

  const chargesOf = async (paymentNo: string) =>
    (await slot.ledger()).charges.filter((c) => c.paymentNo === paymentNo);

  for (const transport of ['trpc', 'rest'] as const) {
    it(`(${transport}) when the gateway answers 5xx for a few seconds, then the call retries with its one key and ends SUCCEEDED with one charge`, async () => {
      const { tenant, user, token, body } = await setup(`out-${transport}`);
      await slot.client.setFaults({ errorRate: 1 });
      const paying = payWith(transport, instance.url, token, body);
      await sleep(2000);
      await slot.client.setFaults({});
      const payment = await paying;
      expect(payment.status).to.equal('SUCCEEDED');
      expect(
        seen.some((a) => a.status === 503),
        'the outage was felt',
      ).to.equal(true);
      expect(new Set(seen.map((a) => a.key)).size, 'one key on every attempt').to.equal(1);
      expect(await chargesOf(payment.paymentNo)).to.have.length(1);
      expect(await keysOf(tenant, user), 'one key for the call').to.have.length(1);
    });

    it(`(${transport}) when the gateway is slow (the answer is 202), then the call follows it to the final payment, one charge, one key`, async () => {
      const { tenant, user, token, body } = await setup(`slow-${transport}`);
      // A gateway that never answers a charge and knows none: the outcome stays unknown, 202.
      await slot.blackHole();
      const paying = payWith(transport, instance.url, token, body);
      await sleep(2500);
      await slot.simulator();
      const payment = await paying;
      expect(payment.status).to.equal('SUCCEEDED');
      expect(
        seen.some((a) => a.processing),
        'a 202 was followed',
      ).to.equal(true);
      expect(new Set(seen.map((a) => a.key)).size, 'one key on every attempt').to.equal(1);
      expect(await chargesOf(payment.paymentNo)).to.have.length(1);
      expect(await keysOf(tenant, user)).to.have.length(1);
    });
  }

  it('when the deadline passes while the payment is still processing, then StillProcessingError carries the key to resume with, and resuming with it gives the payment', async () => {
    const { token, body } = await setup('deadline');
    // A gateway that never answers a charge and knows none: 202 with Retry-After 2 (the lease).
    await slot.blackHole();
    const { trpc } = createServiceClient({
      url: instance.url,
      token,
      retry: { deadlineMs: 1500, baseDelayMs: 100 },
    });
    let stuck: StillProcessingError | undefined;
    try {
      await trpc.payments.create.mutate(body);
    } catch (err) {
      stuck = (err as { cause?: unknown }).cause as StillProcessingError;
    }
    expect(stuck).to.be.instanceOf(StillProcessingError);
    await slot.simulator();
    const { trpc: again } = createServiceClient({
      url: instance.url,
      token,
      retry: { deadlineMs: 30000, baseDelayMs: 100 },
    });
    const resumed = (await again.payments.create.mutate(body, {
      context: { idempotencyKey: stuck?.idempotencyKey },
    })) as { data: { status: string } };
    expect(resumed.data.status).to.equal('SUCCEEDED');
  });

  it('when the caller has no such order (404), then the client does not retry and the error carries the business code', async () => {
    const stranger = tokenFor(uniqueTenant('other'), '890000031', 'user');
    seen = [];
    const { trpc } = createServiceClient({
      url: instance.url,
      token: stranger,
      retry: { onAttempt: (a) => seen.push(a) },
    });
    try {
      await trpc.payments.create.mutate({ merchantOrderNo: 'mo-none', amount: '1.00' });
      expect.fail('the call succeeded');
    } catch (err) {
      expect((err as { data?: { businessCode?: number } }).data?.businessCode).to.equal(404);
    }
    expect(
      seen.map((a) => a.status),
      'one attempt, no retry',
    ).to.deep.equal([404]);
  });

  describe('behind nginx', () => {
    let backend: Instance | undefined;
    let nginx: Nginx | undefined;
    before(async function () {
      if (!findNginx()) {
        console.log('      (nginx is not installed: skipped)');
        this.skip();
      }
      // One upstream, so the instance serving the call is known; it comes back on the same port.
      backend = await startInstance(shortLeaseEnv(db.url, slot.url));
      nginx = await startNginx([backend.url.replace('http://', '')]);
    });
    after(async () => {
      await nginx?.stop();
      await backend?.stop();
    });

    for (const transport of ['trpc', 'rest'] as const) {
      it(`(${transport}) when the instance serving the payment is SIGKILLed mid-request, then the client retries its one key through nginx (503s) until the restarted instance answers, with one charge`, async () => {
        const { tenant, user, token, body } = await setup(`kill-${transport}`);
        await slot.client.setFaults({ latencyMs: 800 });
        const paying = payWith(transport, nginx?.url ?? '', token, body);
        for (let i = 0; i < 200; i++) {
          const [rows] = await db.sequelize.query(
            `SELECT 1 FROM idempotency_records WHERE user_scope = $1 AND status = 'PROCESSING'`,
            { bind: [`${tenant}:${user}`] },
          );
          if ((rows as unknown[]).length > 0) break;
          await sleep(20);
        }
        const port = String(backend?.port);
        backend?.kill();
        await backend?.exited;
        await slot.client.setFaults({});
        backend = await startInstance(shortLeaseEnv(db.url, slot.url, { PORT: port }));
        const payment = await paying;
        expect(payment.status).to.equal('SUCCEEDED');
        expect(
          seen.some((a) => a.status === 503 || a.status === 0),
          'the kill was felt',
        ).to.equal(true);
        expect(new Set(seen.map((a) => a.key)).size, 'one key on every attempt').to.equal(1);
        expect(await chargesOf(payment.paymentNo)).to.have.length(1);
        expect(await keysOf(tenant, user), 'one key for the call').to.have.length(1);
      });
    }
  });
});

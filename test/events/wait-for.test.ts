import { expect } from 'chai';
import { createServiceClient, ReadRefusedError } from '../../client/index.js';
import { type GatewaySlot, startGatewaySlot } from '../support/gateway-slot.js';
import { http } from '../support/http.js';
import { createIsolatedDatabase, type IsolatedDatabase } from '../support/isolated-database.js';
import { createOrder } from '../support/orders.js';
import { pay, shortLeaseEnv } from '../support/payment-calls.js';
import { type Instance, startInstance } from '../support/processes.js';
import { bearer, idempotencyKey, tokenFor, uniqueTenant } from '../support/tokens.js';

type Payment = { id: string; status: string };

describe('client: waitFor after a 202 (events.onEvent, polling as the fallback)', function () {
  this.timeout(120000);
  let db: IsolatedDatabase;
  let slot: GatewaySlot;
  let instance: Instance;

  before(async () => {
    db = await createIsolatedDatabase('waitfor');
    slot = await startGatewaySlot();
    instance = await startInstance(shortLeaseEnv(db.url, slot.url));
  });
  after(async () => {
    await instance?.stop();
    await slot?.close();
    await db?.drop();
  });

  /** A payment answered 202: the gateway never answers, so its outcome stays unknown. */
  async function acceptedPayment(tenant: string, userId: string): Promise<string> {
    const auth = bearer(tenant, userId);
    await createOrder(instance.url, auth, 'mo-1');
    await slot.blackHole();
    const res = await pay(instance.url, auth, idempotencyKey(), { merchantOrderNo: 'mo-1', amount: '25.00' });
    expect(res.status, res.text).to.equal(202);
    const id = res.body.data.resourceId as string;
    const now = await http('GET', `/api/v1/payments/${id}`, { baseUrl: instance.url, headers: auth });
    expect(now.body.data.status).to.equal('PROCESSING');
    return id;
  }

  it('when a payment answered 202 is resolved by the recoverer, then waitFor resolves with the final payment, from its event', async () => {
    const tenant = uniqueTenant('wait');
    const id = await acceptedPayment(tenant, '860000001');
    const fallbacks: string[] = [];
    const client = createServiceClient({ url: instance.url, token: tokenFor(tenant, '860000001') });
    let subscribed: () => void = () => {};
    const whenSubscribed = new Promise<void>((resolve) => {
      subscribed = resolve;
    });
    const waiting = client.waitFor<Payment>('payment', id, {
      onFallback: (why) => fallbacks.push(why),
      onSubscribed: () => subscribed(),
      // No polling fallback here: only the event can resolve it once the first read said PROCESSING.
      connectTimeoutMs: 60000,
    });
    await whenSubscribed;
    await slot.simulator();
    const payment = await waiting;
    expect(payment.status).to.equal('SUCCEEDED');
    const now = await http('GET', `/api/v1/payments/${id}`, {
      baseUrl: instance.url,
      headers: bearer(tenant, '860000001'),
    });
    expect(payment).to.deep.equal(now.body.data);
    expect(fallbacks).to.deep.equal([]);
  });

  // An outside audit of the clients: the one read after the subscription started said 503 (or the
  // connection was reset) for a payment final already; its event, written before the subscription,
  // never came, so waitFor waited until its time-out (a 503 was read as "not final yet") or failed at
  // once (a reset). Such a read now falls back to polling, which finds the payment final.
  for (const failure of ['503', 'reset'] as const) {
    it(`when the read after subscribing fails (${failure}) for a payment final already, then waitFor polls and resolves with it`, async () => {
      const tenant = uniqueTenant(`wait-${failure}`);
      const userId = failure === '503' ? '860000003' : '860000004';
      const auth = bearer(tenant, userId);
      await slot.simulator();
      await createOrder(instance.url, auth, 'mo-1');
      const paid = await pay(instance.url, auth, idempotencyKey(), {
        merchantOrderNo: 'mo-1',
        amount: '25.00',
      });
      expect(paid.status, paid.text).to.equal(201);
      const id = paid.body.data.id as string;
      let failed = 0;
      const flaky: typeof fetch = (input, init) => {
        const url = input instanceof Request ? input.url : String(input);
        if (url.endsWith(`/api/v1/payments/${id}`) && failed === 0) {
          failed += 1;
          if (failure === 'reset') return Promise.reject(new TypeError('fetch failed: reset'));
          const envelope = JSON.stringify({ code: 503, message: 'Database unavailable', data: null });
          return Promise.resolve(
            new Response(envelope, {
              status: 503,
              headers: { 'content-type': 'application/json', 'retry-after': '1' },
            }),
          );
        }
        return fetch(input, init);
      };
      const fallbacks: string[] = [];
      const client = createServiceClient({
        url: instance.url,
        token: tokenFor(tenant, userId),
        fetch: flaky,
      });
      const payment = await client.waitFor<Payment>('payment', id, {
        onFallback: (why) => fallbacks.push(why),
        pollMs: 200,
        // Far beyond the poll: a wait left to the event would end here, with WaitTimeoutError.
        timeoutMs: 30000,
        connectTimeoutMs: 30000,
      });
      expect(failed).to.equal(1);
      expect(payment.status).to.equal('SUCCEEDED');
      expect(fallbacks).to.have.length(1);
      expect(fallbacks[0]).to.match(/^reading \/api\/v1\/payments\/.* failed/);
    });
  }

  it('when the read of the resource is refused (404), then waitFor rejects at once with ReadRefusedError', async () => {
    const tenant = uniqueTenant('wait-404');
    const client = createServiceClient({ url: instance.url, token: tokenFor(tenant, '860000005') });
    const err = await client.waitFor<Payment>('payment', 'pay_nosuchpayment', { timeoutMs: 30000 }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).to.be.instanceOf(ReadRefusedError);
    expect((err as Error).message).to.match(/answered 404/);
  });

  it('when the SSE endpoint is unreachable, then waitFor falls back to polling GET and resolves all the same', async () => {
    const tenant = uniqueTenant('wait-poll');
    const id = await acceptedPayment(tenant, '860000002');
    const fallbacks: string[] = [];
    // A network where the subscription's URL cannot be reached (refused), everything else can.
    const blocking: typeof fetch = (input, init) => {
      const url = input instanceof Request ? input.url : String(input);
      if (url.includes('/trpc/events.onEvent')) return Promise.reject(new TypeError('fetch failed: refused'));
      return fetch(input, init);
    };
    const client = createServiceClient({
      url: instance.url,
      token: tokenFor(tenant, '860000002'),
      fetch: blocking,
    });
    const waiting = client.waitFor<Payment>('payment', id, {
      onFallback: (why) => fallbacks.push(why),
      pollMs: 200,
    });
    await slot.simulator();
    const payment = await waiting;
    expect(payment.status).to.equal('SUCCEEDED');
    expect(fallbacks).to.have.length(1);
    expect(fallbacks[0]).to.match(/cannot connect|did not start|failed/);
  });
});

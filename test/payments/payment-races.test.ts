import { setTimeout as sleep } from 'node:timers/promises';
import { expect } from 'chai';
import { type GatewaySlot, startGatewaySlot } from '../support/gateway-slot.js';
import type { HttpResult } from '../support/http.js';
import { createIsolatedDatabase, type IsolatedDatabase } from '../support/isolated-database.js';
import { createOrder } from '../support/orders.js';
import { pay, payUntilFinal, shortLeaseEnv } from '../support/payment-calls.js';
import { assertPaymentInvariants } from '../support/payment-invariants.js';
import { type Instance, startInstance } from '../support/processes.js';
import { bearer, idempotencyKey, uniqueTenant } from '../support/tokens.js';

const ORDERS = 30;

describe('payments: races over several instances, and the in-flight cap', function () {
  this.timeout(60000);
  let db: IsolatedDatabase;
  let slot: GatewaySlot;
  let racers: Instance[] = [];
  let capped: Instance;

  before(async () => {
    db = await createIsolatedDatabase('races');
    slot = await startGatewaySlot();
    const racerEnv = shortLeaseEnv(db.url, slot.url);
    // Gateway answers slower than the racers' time-out, yet within this one's: its calls hang, then finish.
    const cappedEnv = shortLeaseEnv(db.url, slot.url, {
      IDEMPOTENCY_MAX_IN_FLIGHT: '2',
      IDEMPOTENCY_LEASE_MS: '6000',
      GATEWAY_TIMEOUT_MS: '2200',
    });
    const first = await startInstance(racerEnv); // applies the migrations alone
    const others = await Promise.all([
      startInstance(racerEnv),
      startInstance(racerEnv),
      startInstance(cappedEnv),
    ]);
    racers = [first, others[0], others[1]];
    capped = others[2];
  });
  beforeEach(() => slot.client.setFaults({}));
  after(async () => {
    for (const instance of [...racers, capped]) instance?.kill();
    await Promise.all([...racers, capped].map((i) => i?.exited));
    await slot?.close();
    await db?.drop();
  });

  it('when 30 orders are each paid by 3 concurrent same-key requests on 3 instances plus one other key, then every final answer agrees and each order is charged once', async () => {
    const tenant = uniqueTenant('race');
    const urls = racers.map((r) => r.url);
    const orders = await Promise.all(
      Array.from({ length: ORDERS }, async (_, i) => {
        // One user per order: the race is about keys and orders, not the per-user in-flight cap.
        const auth = bearer(tenant, String(840000000 + i));
        const body = { merchantOrderNo: `mo-${i}`, amount: `${i + 1}.25` };
        await createOrder(urls[i % 3], auth, body.merchantOrderNo, body.amount);
        return { auth, body, key: idempotencyKey(), otherKey: idempotencyKey() };
      }),
    );
    // Slow enough that the duplicates overlap the first one's gateway call.
    await slot.client.setFaults({ latencyMs: 100 });

    const calls = orders.flatMap((o, i) => [
      ...urls.map((url) => ({ order: i, url, key: o.key })),
      { order: i, url: urls[i % 3], key: o.otherKey },
    ]);
    const burst = await Promise.all(
      calls.map((c) => pay(c.url, orders[c.order].auth, c.key, orders[c.order].body)),
    );
    // A wait is bounded (CONTRACT section 5): a request that waited its bound on another one's
    // transaction (the other key's Tx 1 on the same order) answers 503 with Retry-After.
    const early = burst.map((r) => r.status).filter((s) => s !== 201 && s !== 202 && s !== 503);
    expect(early, 'only 201, 202 or 503 while racing').to.deep.equal([]);
    for (const r of burst.filter((b) => b.status === 503))
      expect(r.headers.get('retry-after')).to.not.equal(null);

    // Every answer that is not final yet is retried with its own key until it is.
    const finals: HttpResult[] = await Promise.all(
      burst.map(async (res, n) => {
        if (res.status === 201) return res;
        const c = calls[n];
        const retried = await payUntilFinal(urls, orders[c.order].auth, c.key, orders[c.order].body, {
          retryable: [202, 503],
        });
        return retried.final;
      }),
    );
    for (let i = 0; i < ORDERS; i++) {
      const answers = finals.filter((_, n) => calls[n].order === i);
      expect(answers.map((a) => a.status)).to.deep.equal([201, 201, 201, 201]);
      const payments = answers.map((a) => a.body.data);
      expect(new Set(payments.map((p) => JSON.stringify(p))).size, `order ${i}: one payment`).to.equal(1);
      expect(payments[0]).to.include({ merchantOrderNo: `mo-${i}`, status: 'SUCCEEDED' });
    }

    const payments = await assertPaymentInvariants(db.sequelize, () => slot.ledger(), tenant, {
      exclusiveLedger: true,
    });
    expect(payments).to.have.length(ORDERS);
    const paymentNos = new Set(payments.map((p) => p.paymentNo));
    const charged = (await slot.ledger()).charges.filter((c) => paymentNos.has(c.paymentNo));
    expect(charged).to.have.length(ORDERS);
  });

  it('when the gateway fails at random (5xx, time-outs and resets after charging, declines), then every payment ends final and consistent with the ledger', async () => {
    const tenant = uniqueTenant('chaos');
    const urls = racers.map((r) => r.url);
    const orders = await Promise.all(
      Array.from({ length: 20 }, async (_, i) => {
        const auth = bearer(tenant, String(860000000 + i));
        const body = { merchantOrderNo: `mo-${i}`, amount: '7.00' };
        await createOrder(urls[i % 3], auth, body.merchantOrderNo, body.amount);
        return { auth, body, key: idempotencyKey() };
      }),
    );
    await slot.client.setFaults({
      errorRate: 0.25,
      timeoutAfterChargeRate: 0.25,
      resetAfterChargeRate: 0.2,
      declineRate: 0.2,
    });
    // Two concurrent clients per order with the same key, each retrying on its own instance.
    const outcomes = await Promise.all(
      orders.flatMap((o, i) =>
        [0, 1].map((k) =>
          payUntilFinal(urls[(i + k) % 3], o.auth, o.key, o.body, {
            retryable: [202, 503],
            deadlineMs: 40000,
          }),
        ),
      ),
    );
    await slot.client.setFaults({});
    for (let i = 0; i < orders.length; i++) {
      const [a, b] = [outcomes[2 * i].final, outcomes[2 * i + 1].final];
      expect([a.status, b.status], `${a.text} ${b.text}`).to.deep.equal([201, 201]);
      expect(a.body.data.id).to.equal(b.body.data.id);
      expect(a.body.data.status).to.equal(b.body.data.status);
      expect(a.body.data.status).to.be.oneOf(['SUCCEEDED', 'FAILED']);
    }
    const payments = await assertPaymentInvariants(db.sequelize, () => slot.ledger(), tenant, {
      exclusiveLedger: true,
    });
    expect(payments).to.have.length(orders.length);
    const retried = outcomes.filter((o) => o.statuses.length > 1);
    expect(retried.length, 'the faults must have been felt').to.be.greaterThan(0);
  });

  it('when a user has 2 payments hanging at the gateway and the cap is 2, then the third gets 429 42901 with Retry-After and succeeds later', async () => {
    const tenant = uniqueTenant('cap');
    const auth = bearer(tenant, '850000001');
    const bodies = [1, 2, 3].map((i) => ({ merchantOrderNo: `mo-${i}`, amount: '9.99' }));
    for (const body of bodies) await createOrder(capped.url, auth, body.merchantOrderNo, body.amount);
    await slot.client.setFaults({ latencyMs: 2000 });
    const known = (await slot.ledger()).charges.length;
    const keys = bodies.map(() => idempotencyKey());
    const hanging = [0, 1].map((i) => pay(capped.url, auth, keys[i], bodies[i]));
    // Both are at the gateway (charged on arrival, answer held back): two PROCESSING records.
    for (let i = 0; i < 300 && (await slot.ledger()).charges.length < known + 2; i++) await sleep(10);
    expect((await slot.ledger()).charges.length).to.equal(known + 2);

    const third = await pay(capped.url, auth, keys[2], bodies[2]);
    expect(third.status, third.text).to.equal(429);
    expect(third.body.code).to.equal(42901);
    expect(Number(third.headers.get('retry-after'))).to.be.greaterThan(0);

    for (const res of await Promise.all(hanging)) expect(res.status, res.text).to.equal(201);
    await slot.client.setFaults({});
    // The refusal stored nothing: the same key executes once the others are done.
    const later = await pay(capped.url, auth, keys[2], bodies[2]);
    expect(later.status, later.text).to.equal(201);
    expect(later.headers.get('idempotent-replayed')).to.equal(null);
    const payments = await assertPaymentInvariants(db.sequelize, () => slot.ledger(), tenant, {
      exclusiveLedger: true,
    });
    expect(payments.map((p) => p.status)).to.deep.equal(['SUCCEEDED', 'SUCCEEDED', 'SUCCEEDED']);
  });
});

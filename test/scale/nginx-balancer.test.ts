import { setTimeout as sleep } from 'node:timers/promises';
import { expect } from 'chai';
import { findNginx, type Nginx, startNginx } from '../../deploy/nginx.js';
import { createGatewayClient } from '../../gateway/client.js';
import { type GatewaySimulator, startGatewaySimulator } from '../../gateway/simulator.js';
import type { GatewayClient } from '../../gateway/types.js';
import { type HttpResult, http } from '../support/http.js';
import { type Instance, killAll, startInstances } from '../support/processes.js';
import { sharedServer } from '../support/server.js';
import { bearer, idempotencyKey, uniqueTenant } from '../support/tokens.js';

async function count(sql: string, bind: unknown[]): Promise<number> {
  const { services } = await sharedServer();
  const [rows] = await services.sequelize.query(sql, { bind });
  return (rows as Array<{ n: number }>)[0].n;
}

/** POST requests an instance has answered, from its own /metrics (not through the balancer). */
async function postsServed(instance: Instance): Promise<number> {
  const text = await (await fetch(`${instance.url}/metrics`)).text();
  let total = 0;
  for (const line of text.split('\n')) {
    if (line.startsWith('http_request_duration_seconds_count{') && line.includes('method="POST"')) {
      total += Number(line.split(' ').pop());
    }
  }
  return total;
}

/**
 * What a careful client does: on an answer that says "not finished" or "try again" (202, 502, 503,
 * 504, a dropped connection) it waits and sends the same request with the same key again. Anything
 * else (a 500 included) is final, so the test sees it.
 */
async function untilFinal(
  send: () => Promise<HttpResult>,
  seen: number[],
  deadlineMs = 45000,
): Promise<HttpResult> {
  const deadline = Date.now() + deadlineMs;
  for (;;) {
    let res: HttpResult | undefined;
    try {
      res = await send();
      seen.push(res.status);
    } catch {
      seen.push(0); // connection dropped
    }
    if (res && ![202, 502, 503, 504].includes(res.status)) return res;
    if (Date.now() > deadline) throw new Error(`no final answer; statuses seen: ${seen.join(',')}`);
    await sleep(150);
  }
}

describe('scale-out: deploy/nginx.conf in front of 3 instances on one PostgreSQL', function () {
  this.timeout(180000);
  let nginx: Nginx | undefined;
  let simulator: GatewaySimulator | undefined;
  let gateway: GatewayClient | undefined;
  let instances: Instance[] = [];

  before(async function () {
    this.timeout(180000);
    const binary = findNginx();
    if (!binary) {
      console.warn('    nginx not found (/usr/sbin/nginx or PATH): scale-out tests skipped');
      this.skip();
    }
    await sharedServer(); // migrations applied once, before the processes start
    simulator = await startGatewaySimulator({ host: '127.0.0.1', port: 0 });
    gateway = createGatewayClient({ baseUrl: simulator.url, timeoutMs: 5000 });
    // One gateway shared by all instances (as in production), and a short lease so that a payment
    // whose executor is killed is taken over within seconds.
    instances = await startInstances(3, {
      PAYMENT_GATEWAY_URL: simulator.url,
      IDEMPOTENCY_LEASE_MS: '3000',
      GATEWAY_TIMEOUT_MS: '1000',
      RECOVERER_INTERVAL_MS: '500',
    });
    nginx = await startNginx(
      instances.map((i) => `127.0.0.1:${i.port}`),
      binary,
    );
  });

  after(async function () {
    this.timeout(60000);
    await nginx?.stop();
    await killAll();
    await gateway?.close();
    await simulator?.close();
  });

  const via =
    (path: string, opts: Parameters<typeof http>[2] = {}) =>
    (method: string) =>
      http(method, path, { ...opts, baseUrl: nginx!.url });

  it('when requests pass the balancer, then request ids are forwarded or made, and nginx errors are envelopes', async () => {
    const auth = bearer(uniqueTenant(), '910000001');
    const made = await via('/healthz')('GET');
    expect(made.status).to.equal(200);
    // 32 hex characters is nginx's $request_id; the service would have made a UUID.
    expect(made.headers.get('x-request-id')).to.match(/^[0-9a-f]{32}$/);
    const kept = await via('/healthz', { headers: { 'X-Request-Id': 'client-id-123' } })('GET');
    expect(kept.headers.get('x-request-id')).to.equal('client-id-123');

    const tooLarge = await via('/api/v1/orders', {
      headers: { ...auth, 'Idempotency-Key': idempotencyKey() },
      body: { merchantOrderNo: 'big', amount: '1.00', description: 'x'.repeat(70000) },
    })('POST');
    expect(tooLarge.status).to.equal(413);
    expect(tooLarge.body).to.deep.equal({
      code: 413,
      message: 'Request body larger than 65536 bytes',
      data: null,
    });
    expect(tooLarge.headers.get('x-request-id')).to.match(/^[0-9a-f]{32}$/);

    const metrics = await via('/metrics')('GET');
    expect(metrics.status).to.equal(404);
    expect(metrics.body.code).to.equal(404);

    const log = await nginx!.accessLog();
    const healthz = log.filter((l) => l.uri === '/healthz' && l.request_id === 'client-id-123');
    expect(healthz).to.have.length(1);
    expect(String(healthz[0].upstream_addr)).to.match(/^127\.0\.0\.1:\d+$/);
  });

  it('when 60 identical order creates race through nginx, then one order and every answer is its 201 or a 202', async () => {
    const tenant = uniqueTenant();
    const headers = { ...bearer(tenant, '910000002'), 'Idempotency-Key': idempotencyKey() };
    const body = { merchantOrderNo: `mo-${tenant}`, amount: '12.30' };
    const answers = await Promise.all(
      Array.from({ length: 60 }, () => via('/api/v1/orders', { headers, body })('POST')),
    );
    const statuses = answers.map((a) => a.status);
    expect(
      statuses.every((s) => s === 201 || s === 202),
      statuses.join(','),
    ).to.equal(true);
    const ids = new Set(answers.filter((a) => a.status === 201).map((a) => a.body.data.id));
    expect(ids.size).to.equal(1);
    expect(await count('SELECT count(*)::int AS n FROM orders WHERE tenant_id = $1', [tenant])).to.equal(1);
  });

  it('when 30 users race with their own keys on one merchantOrderNo through nginx, then one order; the rest get 409 40904 (or 503 with Retry-After when their bounded wait ended first)', async () => {
    const tenant = uniqueTenant();
    // One user each: one user's burst of 30 would meet the in-flight cap (20) instead.
    const answers = await Promise.all(
      Array.from({ length: 30 }, (_, i) =>
        via('/api/v1/orders', {
          headers: { ...bearer(tenant, String(910000100 + i)), 'Idempotency-Key': idempotencyKey() },
          body: { merchantOrderNo: 'same-no', amount: 5 },
        })('POST'),
      ),
    );
    expect(answers.filter((a) => a.status === 201)).to.have.length(1);
    for (const a of answers.filter((x) => x.status !== 201)) {
      expect([409, 503], a.text).to.include(a.status);
      if (a.status === 409) expect(a.body.code).to.equal(40904);
      else expect(a.headers.get('retry-after')).to.not.equal(null);
    }
    expect(await count('SELECT count(*)::int AS n FROM orders WHERE tenant_id = $1', [tenant])).to.equal(1);
  });

  it('when one payment is sent 20 times at once with one key through nginx, then the gateway charges once', async () => {
    const tenant = uniqueTenant();
    const auth = bearer(tenant, '910000004');
    const order = await via('/api/v1/orders', {
      headers: { ...auth, 'Idempotency-Key': idempotencyKey() },
      body: { merchantOrderNo: 'pay-once', amount: '40.00' },
    })('POST');
    expect(order.status).to.equal(201);
    const headers = { ...auth, 'Idempotency-Key': idempotencyKey() };
    const answers = await Promise.all(
      Array.from({ length: 20 }, () =>
        via('/api/v1/payments', { headers, body: { merchantOrderNo: 'pay-once', amount: '40.00' } })('POST'),
      ),
    );
    const statuses = answers.map((a) => a.status);
    expect(
      statuses.every((s) => s === 201 || s === 202),
      statuses.join(','),
    ).to.equal(true);
    const paid = answers.filter((a) => a.status === 201);
    expect(new Set(paid.map((a) => a.body.data.id)).size).to.equal(1);
    const final = await untilFinal(
      () =>
        via('/api/v1/payments', { headers, body: { merchantOrderNo: 'pay-once', amount: '40.00' } })('POST'),
      [],
    );
    expect(final.status).to.equal(201);
    expect(final.body.data.status).to.equal('SUCCEEDED');
    const { charges } = await gateway!.ledger();
    expect(charges.filter((c) => c.paymentNo === final.body.data.paymentNo)).to.have.length(1);
    expect(
      await count(
        'SELECT count(*)::int AS n FROM payments WHERE merchant_order_no = $1 AND merchant_id = $2',
        ['pay-once', final.body.data.merchantId],
      ),
    ).to.equal(1);
  });

  it('when 90 order creates with fresh keys go through nginx, then all 3 instances serve some', async () => {
    const before = await Promise.all(instances.map(postsServed));
    const tenant = uniqueTenant();
    const answers = await Promise.all(
      Array.from({ length: 90 }, (_, i) =>
        via('/api/v1/orders', {
          headers: { ...bearer(tenant, String(920000000 + i)), 'Idempotency-Key': idempotencyKey() },
          body: { merchantOrderNo: `spread-${i}`, amount: '1.00' },
        })('POST'),
      ),
    );
    expect(answers.every((a) => a.status === 201)).to.equal(true);
    const after = await Promise.all(instances.map(postsServed));
    const served = after.map((n, i) => n - before[i]);
    expect(
      served.every((n) => n > 0),
      `POSTs served per instance: ${served.join(', ')}`,
    ).to.equal(true);
    expect(served.reduce((a, b) => a + b, 0)).to.equal(90);
  });

  it('when an instance is killed mid-run, then clients retrying with the same key get one order and one charge each', async () => {
    const tenant = uniqueTenant();
    const flows = 24;
    const seen: number[][] = Array.from({ length: flows }, () => []);
    // Charges take 400 ms at the gateway, so payments are in flight on every instance when one dies.
    await gateway!.setFaults({ latencyMs: 400 });
    const results = Array.from({ length: flows }, async (_, i) => {
      // One user per flow: the per-user in-flight cap (20) is not what this test is about.
      const auth = bearer(tenant, String(930000000 + i));
      const orderHeaders = { ...auth, 'Idempotency-Key': idempotencyKey() };
      const orderBody = { merchantOrderNo: `kill-${i}`, amount: '9.99' };
      const orders: HttpResult[] = [];
      const order = await untilFinal(async () => {
        const res = await via('/api/v1/orders', { headers: orderHeaders, body: orderBody })('POST');
        if (res.status === 201) orders.push(res);
        return res;
      }, seen[i]);
      const payHeaders = { ...auth, 'Idempotency-Key': idempotencyKey() };
      const payment = await untilFinal(
        () => via('/api/v1/payments', { headers: payHeaders, body: orderBody })('POST'),
        seen[i],
      );
      return { order, orders, payment };
    });

    // Kill once payments are committed as PROCESSING, i.e. waiting on the gateway in the instances.
    const deadline = Date.now() + 20000;
    while (
      (await count(
        "SELECT count(*)::int AS n FROM payments WHERE merchant_id = $1 AND status = 'PROCESSING'",
        [tenant],
      )) <
      flows / 2
    ) {
      if (Date.now() > deadline) throw new Error('payments never got in flight');
      await sleep(20);
    }
    instances[0].kill();
    const done = await Promise.all(results);
    await gateway!.setFaults({});

    for (const { order, orders, payment } of done) {
      expect(order.status).to.equal(201);
      expect(new Set(orders.map((o) => o.body.data.id)).size).to.equal(1);
      expect(payment.status, payment.text).to.equal(201);
      expect(payment.body.data.status).to.equal('SUCCEEDED');
    }
    // The kill hit requests in flight: nginx answered them with its 503 envelope (or dropped them).
    const interrupted = seen.flat().filter((s) => s === 503 || s === 0);
    expect(interrupted.length, `statuses: ${seen.map((s) => s.join(',')).join(' | ')}`).to.be.greaterThan(0);

    const paymentNos = done.map((d) => d.payment.body.data.paymentNo as string);
    const { charges } = await gateway!.ledger();
    for (const paymentNo of paymentNos) {
      expect(
        charges.filter((c) => c.paymentNo === paymentNo),
        paymentNo,
      ).to.have.length(1);
    }
    expect(new Set(done.map((d) => d.payment.body.data.merchantId))).to.deep.equal(new Set([tenant]));
    for (let i = 0; i < flows; i++) {
      const bind = [tenant, `kill-${i}`];
      const orders = 'SELECT count(*)::int AS n FROM orders WHERE tenant_id = $1 AND merchant_order_no = $2';
      expect(await count(orders, bind)).to.equal(1);
      const paid =
        "SELECT count(*)::int AS n FROM payments WHERE merchant_id = $1 AND merchant_order_no = $2 AND status = 'SUCCEEDED'";
      expect(await count(paid, bind)).to.equal(1);
    }
    expect(await count('SELECT count(*)::int AS n FROM payments WHERE merchant_id = $1', [tenant])).to.equal(
      flows,
    );
  });
});

import { expect } from 'chai';
import { http } from '../support/http.js';
import { createOrder } from '../support/orders.js';
import { pay } from '../support/payment-calls.js';
import { sharedServer } from '../support/server.js';
import { bearer, idempotencyKey, uniqueTenant } from '../support/tokens.js';

interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** Parses the Prometheus text format (enough of it for these assertions: no escaped quotes in labels). */
function parseMetrics(text: string): Sample[] {
  return text
    .split('\n')
    .filter((l) => l !== '' && !l.startsWith('#'))
    .map((line) => {
      const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
      if (!m) throw new Error(`not a Prometheus sample: ${line}`);
      const labels = Object.fromEntries(
        [...(m[2] ?? '').matchAll(/(\w+)="([^"]*)"/g)].map((l) => [l[1], l[2]]),
      );
      return { name: m[1], labels, value: Number(m[3]) };
    });
}

async function scrape(): Promise<Sample[]> {
  const res = await http('GET', '/metrics');
  expect(res.status).to.equal(200);
  expect(res.headers.get('content-type')).to.match(/^text\/plain/);
  return parseMetrics(res.text);
}

/** Sum of a metric's samples whose labels include `labels` (0 when there is none yet). */
function total(samples: Sample[], name: string, labels: Record<string, string> = {}): number {
  return samples
    .filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v))
    .reduce((sum, s) => sum + s.value, 0);
}

describe('ops: Prometheus metrics (GET /metrics)', () => {
  it('when an order is created, replayed, read and paid, then the counters move and route labels are templates', async () => {
    const tenant = uniqueTenant('metrics');
    const auth = bearer(tenant, '830000001');
    const { url } = await sharedServer();
    const before = await scrape();

    const key = idempotencyKey();
    const orderBody = { merchantOrderNo: 'mo-metrics', amount: '7.50' };
    const first = await http('POST', '/api/v1/orders', {
      headers: { ...auth, 'Idempotency-Key': key },
      body: orderBody,
    });
    expect(first.status, first.text).to.equal(201);
    const again = await http('POST', '/api/v1/orders', {
      headers: { ...auth, 'Idempotency-Key': key },
      body: orderBody,
    });
    expect(again.headers.get('idempotent-replayed')).to.equal('true');
    const orderId: string = first.body.data.id;
    expect((await http('GET', `/api/v1/orders/${orderId}`, { headers: auth })).status).to.equal(200);
    await createOrder(url, auth, 'mo-metrics-pay', '3.00');
    const paid = await pay(url, auth, idempotencyKey(), {
      merchantOrderNo: 'mo-metrics-pay',
      amount: '3.00',
    });
    expect(paid.status, paid.text).to.equal(201);

    const after = await scrape();
    const delta = (name: string, labels: Record<string, string> = {}) =>
      total(after, name, labels) - total(before, name, labels);

    const idem = 'idempotency_outcomes_total';
    const executed = after.filter((s) => s.name === idem && s.labels.outcome === 'executed');
    // The operation label is the procedure name (one per operation, whichever transport or alias).
    expect(executed.map((s) => s.labels.operation)).to.include('orders.create');
    expect(delta(idem, { operation: 'orders.create', outcome: 'executed' })).to.be.at.least(2);
    expect(delta(idem, { operation: 'orders.create', outcome: 'replayed' })).to.be.at.least(1);
    expect(delta(idem, { operation: 'payments.create', outcome: 'executed' })).to.be.at.least(1);
    expect(delta('payment_gateway_calls_total', { call: 'charge' })).to.be.at.least(1);

    const duration = after.filter((s) => s.name === 'http_request_duration_seconds_count');
    expect(duration.map((s) => s.labels.route)).to.include.members(['/api/v1/orders', '/api/v1/orders/{id}']);
    expect(
      delta('http_request_duration_seconds_count', { route: '/api/v1/orders/{id}', method: 'GET' }),
    ).to.be.at.least(1);
    // Cardinality: a label is a template, never a concrete path (no numeric segment, no id of this test).
    const routes = [...new Set(duration.map((s) => s.labels.route))];
    expect(
      routes.filter((r) => /\/\d+(\/|$)/.test(r) || r.split('/').includes(orderId)),
      'raw paths as route labels',
    ).to.deep.equal([]);
    expect(
      after.some((s) => s.name === 'http_request_duration_seconds_bucket' && s.labels.le === '+Inf'),
    ).to.equal(true);
    expect(total(after, 'process_cpu_seconds_total')).to.be.greaterThan(0);
    expect(after.some((s) => s.name === 'nodejs_heap_size_used_bytes')).to.equal(true);
  });
});

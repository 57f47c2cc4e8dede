import { randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { Webhook } from 'standardwebhooks';
import { createServiceClient } from '../../client/index.js';
import { signToken } from '../../routers/auth/jwt.js';
import type { BenchRun } from '../bench-run.js';
import { percentile } from '../load.js';
import { SECRETS } from '../settings.js';

/** Orders written one after another, this far apart: latency, not throughput, is measured. */
const GAP_MS = 100;
const SUBSCRIBERS = 100;

/** An admin of a tenant of its own (no user row: the token's role stands), so no other scenario's event reaches it. */
function adminOf(tenant: string): string {
  return signToken(SECRETS.JWT_SECRET, { tenantId: tenant, userId: '1', role: 'admin' }, 3600).token;
}

/**
 * Writes `n` keyed orders over REST, GAP_MS apart; for each, when it was sent and when its 201 came
 * (the transaction committed in between: sent → arrival is an upper bound of commit → arrival, 201 →
 * arrival a lower bound).
 */
async function writeOrders(
  url: string,
  token: string,
  prefix: string,
  n: number,
): Promise<Map<string, { send: number; answer: number }>> {
  const sent = new Map<string, { send: number; answer: number }>();
  for (let i = 0; i < n; i++) {
    const no = `${prefix}-${i}`;
    const send = performance.now();
    const res = await fetch(`${url}/api/v1/orders`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${token}`,
        'content-type': 'application/json',
        'idempotency-key': randomUUID(),
      },
      body: JSON.stringify({ merchantOrderNo: no, amount: '1.00' }),
    });
    const answer = performance.now();
    if (res.status !== 201) throw new Error(`order ${no}: ${res.status} ${await res.text()}`);
    await res.arrayBuffer();
    sent.set(no, { send, answer });
    await sleep(GAP_MS);
  }
  return sent;
}

const latencies = (
  sent: Map<string, { send: number; answer: number }>,
  arrivals: Map<string, number[]>,
  expected: number,
) => {
  const fromAnswer: number[] = [];
  const fromSend: number[] = [];
  let missing = 0;
  for (const [no, t] of sent) {
    const got = arrivals.get(no) ?? [];
    missing += expected - got.length;
    for (const at of got) {
      fromAnswer.push(Math.max(0, at - t.answer));
      fromSend.push(at - t.send);
    }
  }
  const sorted = (xs: number[]) => Float64Array.from(xs).sort();
  return { fromAnswer: sorted(fromAnswer), fromSend: sorted(fromSend), missing };
};

const waitUntil = async (done: () => boolean, ms: number) => {
  const deadline = Date.now() + ms;
  while (!done() && Date.now() < deadline) await sleep(50);
};

/**
 * Commit → subscriber (issue 28): SUBSCRIBERS subscriptions to events.onEvent through the shipped
 * client (httpSubscriptionLink over SSE), then orders written one at a time; every (order,
 * subscriber) pair's latency. Then commit → webhook receiver: one endpoint at a real receiver on
 * loopback that verifies every signature with `standardwebhooks`, orders written one at a time.
 * Both on the bench's one service process (whose delivery loop and feed waker are its defaults).
 */
export async function eventsScenario(ctx: BenchRun): Promise<void> {
  const { P, log, results, rows, server } = ctx;
  const orders = P.eventOrders;

  // 1. Subscribers.
  const token = adminOf(`bench-events-${ctx.runId}`);
  const arrivals = new Map<string, number[]>();
  let started = 0;
  const subscriptions = Array.from({ length: SUBSCRIBERS }, () =>
    createServiceClient({ url: server.url, token }).trpc.events.onEvent.subscribe(
      { types: ['order.created'] },
      {
        onStarted: () => {
          started += 1;
        },
        onData: (tracked) => {
          const at = performance.now();
          const no = (tracked.data.data as { merchantOrderNo: string }).merchantOrderNo;
          arrivals.set(no, [...(arrivals.get(no) ?? []), at]);
        },
      },
    ),
  );
  try {
    await waitUntil(() => started === SUBSCRIBERS, 30_000);
    if (started < SUBSCRIBERS) throw new Error(`events: ${started} of ${SUBSCRIBERS} subscriptions started`);
    log(`events: ${SUBSCRIBERS} subscribers connected; writing ${orders} orders ${GAP_MS} ms apart`);
    const sent = await writeOrders(server.url, token, 'lat', orders);
    await waitUntil(
      () => [...sent.keys()].every((no) => (arrivals.get(no)?.length ?? 0) >= SUBSCRIBERS),
      30_000,
    );
    const l = latencies(sent, arrivals, SUBSCRIBERS);
    const p = (xs: Float64Array, q: number) => percentile(xs, q);
    results.eventsSubscribers = {
      subscribers: SUBSCRIBERS,
      orders,
      missing: l.missing,
      fromAnswer: { p50: p(l.fromAnswer, 0.5), p99: p(l.fromAnswer, 0.99), max: l.fromAnswer.at(-1) },
      fromSend: { p50: p(l.fromSend, 0.5), p99: p(l.fromSend, 0.99), max: l.fromSend.at(-1) },
    };
    log(
      `events: commit → ${SUBSCRIBERS} subscribers, p50 ${p(l.fromAnswer, 0.5).toFixed(0)}–${p(l.fromSend, 0.5).toFixed(0)} ms, p99 ${p(l.fromAnswer, 0.99).toFixed(0)}–${p(l.fromSend, 0.99).toFixed(0)} ms, ${l.missing} missing`,
    );
    const upper = p(l.fromSend, 0.99);
    rows.push({
      id: 'events-subscribers',
      scenario: `Commit → ${SUBSCRIBERS} subscribers (events.onEvent, SSE), ${orders} events`,
      p50: p(l.fromSend, 0.5),
      p99: upper,
      nonFinal: l.missing ? `missing×${l.missing}` : '',
      value: `p99 ${upper.toFixed(0)} ms`,
      target: 'p99 ≤ 1000 ms, none missing',
      pass: upper <= 1000 && l.missing === 0,
    });
  } finally {
    for (const s of subscriptions) s.unsubscribe();
  }

  // 2. A webhook endpoint with a healthy receiver.
  const whToken = adminOf(`bench-wh-${ctx.runId}`);
  const hooks = new Map<string, number[]>();
  let unverified = 0;
  let secret = '';
  const receiver = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const at = performance.now();
      const body = Buffer.concat(chunks).toString('utf8');
      try {
        new Webhook(secret).verify(body, req.headers as Record<string, string>);
        const event = JSON.parse(body) as { type: string; data: { merchantOrderNo?: string } };
        const no = event.data.merchantOrderNo;
        if (event.type === 'order.created' && no && !hooks.has(no)) hooks.set(no, [at]);
      } catch {
        unverified += 1;
      }
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  try {
    const port = (receiver.address() as AddressInfo).port;
    const created = await fetch(`${server.url}/api/v1/webhook-endpoints`, {
      method: 'POST',
      headers: { authorization: `Bearer ${whToken}`, 'content-type': 'application/json' },
      body: JSON.stringify({ url: `http://127.0.0.1:${port}/hook` }),
    });
    if (created.status !== 201)
      throw new Error(`webhook endpoint: ${created.status} ${await created.text()}`);
    secret = ((await created.json()) as { data: { secret: string } }).data.secret;
    log(`webhooks: writing ${orders} orders ${GAP_MS} ms apart`);
    const sent = await writeOrders(server.url, whToken, 'wh', orders);
    await waitUntil(() => hooks.size >= sent.size, 60_000);
    const l = latencies(sent, hooks, 1);
    const p = (q: number) => percentile(l.fromSend, q);
    results.webhooks = {
      orders,
      missing: l.missing,
      unverified,
      fromAnswer: { p50: percentile(l.fromAnswer, 0.5), p99: percentile(l.fromAnswer, 0.99) },
      fromSend: { p50: p(0.5), p99: p(0.99), max: l.fromSend.at(-1) },
    };
    log(
      `webhooks: commit → receiver p50 ${p(0.5).toFixed(0)} ms, p99 ${p(0.99).toFixed(0)} ms, ${l.missing} missing, ${unverified} unverified`,
    );
    rows.push({
      id: 'webhooks',
      scenario: `Commit → webhook receiver (healthy, signatures verified), ${orders} events`,
      p50: p(0.5),
      p99: p(0.99),
      nonFinal: l.missing || unverified ? `missing×${l.missing} unverified×${unverified}` : '',
      value: `p99 ${p(0.99).toFixed(0)} ms`,
      target: 'reported; none missing',
      pass: l.missing === 0 && unverified === 0 ? undefined : false,
    });
  } finally {
    receiver.closeAllConnections();
    receiver.close();
  }
}

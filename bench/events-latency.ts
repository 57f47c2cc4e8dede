/**
 * Commit → subscriber latency of events.onEvent (issue 28): one service instance (tsx, as the tests
 * start it), SUBSCRIBERS subscriptions through the shipped client (httpSubscriptionLink over SSE),
 * ORDERS orders created one after another over REST; for each order's event, the time from the
 * POST's answer (just after the commit: a lower bound) and from its sending (an upper bound) to its
 * arrival at each subscriber. Prints p50/p99/max over all (order, subscriber) pairs.
 *
 *   node --import tsx bench/events-latency.ts [SUBSCRIBERS=100] [ORDERS=50]
 *
 * DATABASE_URL set: a scratch database on that server; otherwise an embedded PostgreSQL.
 */
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { createServiceClient } from '../client/index.js';
import { freePort } from '../core/embedded-postgres.js';
import { signToken } from '../routers/auth/jwt.js';
import { openBenchDatabase } from './postgres.js';
import { startNode } from './processes.js';
import { SECRETS } from './settings.js';

const SUBSCRIBERS = Number(process.argv[2] ?? 100);
const ORDERS = Number(process.argv[3] ?? 50);
const TENANT = 'bench-events';

const quantile = (sorted: number[], q: number) =>
  sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
const summary = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return `p50 ${quantile(s, 0.5).toFixed(1)} ms, p99 ${quantile(s, 0.99).toFixed(1)} ms, max ${s.at(-1)?.toFixed(1)} ms (n=${s.length})`;
};

async function main() {
  const db = await openBenchDatabase((line) => console.log(line), { tcp: false });
  const port = await freePort();
  const service = await startNode({
    name: 'service',
    args: ['--import', 'tsx', 'server/main.ts'],
    env: {
      ...SECRETS,
      NODE_ENV: 'test',
      LOG_LEVEL: 'warn',
      DATABASE_URL: db.url,
      HOST: '127.0.0.1',
      PORT: String(port),
    },
    port,
    readyPath: '/readyz',
    timeoutMs: 120000,
  });
  try {
    const token = signToken(SECRETS.JWT_SECRET, { tenantId: TENANT, userId: '1', role: 'admin' }, 3600).token;
    const arrivals = new Map<string, number[]>(); // merchantOrderNo → arrival times
    const subscriptions = [];
    let started = 0;
    for (let i = 0; i < SUBSCRIBERS; i++) {
      const { trpc } = createServiceClient({ url: service.url, token });
      subscriptions.push(
        trpc.events.onEvent.subscribe(
          { types: ['order.created'] },
          {
            onStarted: () => {
              started += 1;
            },
            onData: (tracked) => {
              const at = performance.now();
              const no = (tracked.data.data as { merchantOrderNo: string }).merchantOrderNo;
              const list = arrivals.get(no) ?? [];
              list.push(at);
              arrivals.set(no, list);
            },
          },
        ),
      );
    }
    while (started < SUBSCRIBERS) await sleep(50);
    console.log(`${SUBSCRIBERS} subscribers connected; writing ${ORDERS} orders`);
    const fromAnswer: number[] = [];
    const fromSend: number[] = [];
    const sent = new Map<string, { send: number; answer: number }>();
    for (let i = 0; i < ORDERS; i++) {
      const no = `lat-${i}`;
      const send = performance.now();
      const res = await fetch(`${service.url}/api/v1/orders`, {
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
      sent.set(no, { send, answer });
      await sleep(100);
    }
    const deadline = Date.now() + 30000;
    while (
      [...sent.keys()].some((no) => (arrivals.get(no)?.length ?? 0) < SUBSCRIBERS) &&
      Date.now() < deadline
    )
      await sleep(100);
    let missing = 0;
    for (const [no, t] of sent) {
      const got = arrivals.get(no) ?? [];
      missing += SUBSCRIBERS - got.length;
      for (const at of got) {
        fromAnswer.push(Math.max(0, at - t.answer));
        fromSend.push(at - t.send);
      }
    }
    console.log(`commit → subscriber, from the 201 (lower bound): ${summary(fromAnswer)}`);
    console.log(`commit → subscriber, from the POST sent (upper bound): ${summary(fromSend)}`);
    console.log(`deliveries missing after 30 s: ${missing}`);
    for (const s of subscriptions) s.unsubscribe();
  } finally {
    await service.stop();
    await db.stop();
  }
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);

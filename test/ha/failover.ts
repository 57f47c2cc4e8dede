/**
 * The failover scenario, shared by test/ha/failover.test.ts and `npm run failover`: 3 service
 * instances on the cluster (through PgBouncer), the chaos clients' mixed load of idempotent order
 * creates and payments with retries (gateway simulator with latency), then the leader's PostgreSQL
 * and Patroni are SIGKILLed mid-load; Patroni promotes the synchronous replica. The old leader then
 * rejoins as a replica (pg_rewind), and the next round kills the new leader. The chaos checker's
 * invariants are checked over the whole history, and a summary is computed from it.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import type { Cluster } from '../../deploy/ha/cluster.js';
import { signToken } from '../../routers/auth/jwt.js';
import type { ChaosReport } from '../chaos/driver.js';
import { runChaos } from '../chaos/driver.js';
import type { RequestEvent } from '../chaos/history.js';
import { TEST_ENV } from '../support/server.js';

export interface FailoverRound {
  round: number;
  oldLeader: string;
  newLeader: string;
  /** From the SIGKILL to the first write committed through HAProxy on the new leader. */
  withoutPrimaryMs: number;
  /** From the SIGKILL until every instance had answered a new create with 201 again. */
  untilEveryInstanceServedMs: number;
  /** From restarting the old leader's Patroni until it replicates again (pg_rewind when needed). */
  rejoinMs: number;
  /** The old leader's role once it rejoined. */
  oldLeaderRole: string;
  /** An instance started right after the kill (its migrations meet no leader): when it was ready. */
  startedDuringFailoverReadyMs: number;
}

export interface FailoverSummary {
  requests: number;
  answers: Record<string, number>;
  acknowledgedOrders: number;
  ordersFound: number;
  acknowledgedPayments: number;
  paymentsFound: number;
  lost: number;
  payments: Record<string, number>;
  paidOrders: number;
  /** The most standing charges any order has (1: each paid order charged exactly once). */
  maxChargesPerPaidOrder: number;
  /** Answers that are 5xx but not 503. */
  other5xx: number;
  /** 503s and 202s without Retry-After. */
  withoutRetryAfter: number;
  violations: string[];
  rounds: FailoverRound[];
}

export interface FailoverOptions {
  cluster: Cluster;
  rounds?: number;
  /** Load before the first kill, and after each round's recovery. */
  loadMs?: number;
  seed?: number;
  clients?: number;
  log?: (line: string) => void;
}

/** Commits a row through HAProxy (the leader) until one commit succeeds; the time it took. */
async function untilWritable(adminUrl: string, since: number, timeoutMs = 120000): Promise<number> {
  while (Date.now() - since < timeoutMs) {
    const client = new pg.Client({ connectionString: adminUrl, connectionTimeoutMillis: 1000 });
    client.on('error', () => {});
    try {
      await client.connect();
      await client.query("SET statement_timeout = '2s'");
      await client.query('INSERT INTO ha_probe (at) VALUES (now())');
      return Date.now() - since;
    } catch {
      await sleep(100);
    } finally {
      await client.end().catch(() => {});
    }
  }
  throw new Error(`no writable leader within ${timeoutMs} ms`);
}

/** Sends a new order create to every instance until each has answered 201; the time it took. */
async function untilEveryInstanceServes(urls: string[], since: number, timeoutMs = 120000): Promise<number> {
  const token = signToken(
    TEST_ENV.JWT_SECRET,
    { tenantId: 'haprobe', userId: '1', role: 'user' },
    3600,
  ).token;
  let n = 0;
  const pending = new Set(urls);
  while (pending.size > 0) {
    if (Date.now() - since > timeoutMs) throw new Error(`instances not serving within ${timeoutMs} ms`);
    for (const url of [...pending]) {
      n++;
      const res = await fetch(`${url}/api/v1/orders`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${token}`,
          'content-type': 'application/json',
          'idempotency-key': `ha-probe-${since}-${n}`.padEnd(20, 'x'),
        },
        body: JSON.stringify({ merchantOrderNo: `probe-${since}-${n}`, amount: '1.00' }),
        signal: AbortSignal.timeout(5000),
      }).catch(() => undefined);
      await res?.arrayBuffer();
      if (res?.status === 201) pending.delete(url);
    }
    if (pending.size > 0) await sleep(100);
  }
  return Date.now() - since;
}

export async function runFailover(
  opts: FailoverOptions,
): Promise<{ report: ChaosReport; summary: FailoverSummary }> {
  const { cluster } = opts;
  const log = opts.log ?? (() => {});
  const rounds = opts.rounds ?? 2;
  const loadMs = opts.loadMs ?? 5000;
  const timings: FailoverRound[] = [];
  const admin = new pg.Client(cluster.adminUrl);
  await admin.connect();
  await admin.query('CREATE TABLE IF NOT EXISTS ha_probe (at timestamptz NOT NULL)');
  await admin.end();

  const report = await runChaos({
    seed: opts.seed ?? 1,
    durationMs: 0,
    databaseUrl: cluster.databaseUrl,
    adminUrl: cluster.adminUrl,
    clients: opts.clients ?? 6,
    log,
    async plan(run) {
      await run.setGatewayFaults({ latencyMs: 40 });
      await sleep(loadMs);
      for (let round = 1; round <= rounds; round++) {
        const oldLeader = await cluster.leader();
        if (!oldLeader) throw new Error('no leader before the kill');
        run.disturbAll(true);
        run.fault('failover', `round ${round}: SIGKILL ${oldLeader} (Patroni and PostgreSQL)`);
        const killedAt = Date.now();
        await cluster.killMember(oldLeader);
        // A new instance starting now must wait for a writable leader, not exit.
        const late = run.startInstance().then((instance) => ({ instance, readyMs: Date.now() - killedAt }));
        const [withoutPrimaryMs, untilEveryInstanceServedMs, started] = await Promise.all([
          untilWritable(cluster.adminUrl, killedAt),
          untilEveryInstanceServes(run.instanceUrls(), killedAt),
          late,
        ]);
        started.instance.kill();
        await started.instance.exited;
        const newLeader = (await cluster.leader()) ?? '?';
        run.fault('writable', `${newLeader} took writes after ${withoutPrimaryMs} ms`);
        run.fault('served', `every instance served again after ${untilEveryInstanceServedMs} ms`);
        run.disturbAll(false);
        await sleep(loadMs);
        const rejoinAt = Date.now();
        await cluster.startMember(oldLeader);
        const members = await cluster.waitHealthy();
        const rejoinMs = Date.now() - rejoinAt;
        const oldLeaderRole = members.find((m) => m.name === oldLeader)?.role ?? '?';
        run.fault('rejoin', `${oldLeader} rejoined as ${oldLeaderRole} after ${rejoinMs} ms`);
        timings.push({
          round,
          oldLeader,
          newLeader,
          withoutPrimaryMs,
          untilEveryInstanceServedMs,
          rejoinMs,
          oldLeaderRole,
          startedDuringFailoverReadyMs: started.readyMs,
        });
        await sleep(loadMs / 2);
      }
    },
  });
  return { report, summary: summarize(report, timings) };
}

/** The figures the closing note and docs/SCALING.md quote, from the history and the final state. */
export function summarize(report: ChaosReport, rounds: FailoverRound[]): FailoverSummary {
  const requests = report.history.filter((e): e is RequestEvent => e.type === 'request');
  const final = report.final;
  const orders = new Map(final.orders.map((o) => [`${o.tenant}/${o.merchantOrderNo}`, o]));
  const paymentsByNo = new Map(final.payments.map((p) => [p.paymentNo, p]));
  const ackOrders = new Map<string, string>();
  const ackPayments = new Map<string, string>();
  let other5xx = 0;
  let withoutRetryAfter = 0;
  for (const r of requests) {
    const a = r.answer;
    if (a.kind === 'ok' && r.op === 'orders.create')
      ackOrders.set(`${r.tenant}/${r.merchantOrderNo}`, (JSON.parse(r.body) as { amount: string }).amount);
    if (a.kind === 'ok' && r.op === 'payments.create') {
      const data = a.data as { paymentNo?: string; status?: string };
      if (data.paymentNo) ackPayments.set(data.paymentNo, data.status ?? '?');
    }
    if (a.kind === 'error' && a.httpStatus >= 500 && a.httpStatus !== 503) other5xx++;
    if (
      (a.kind === 'error' && a.httpStatus === 503 && !a.retryAfter) ||
      (a.kind === 'processing' && !a.retryAfter)
    )
      withoutRetryAfter++;
  }
  let ordersFound = 0;
  for (const [key, amount] of ackOrders) {
    const o = orders.get(key);
    if (o && Number(o.amount) === Number(amount)) ordersFound++;
  }
  let paymentsFound = 0;
  for (const [no, status] of ackPayments) if (paymentsByNo.get(no)?.status === status) paymentsFound++;
  const refunded = new Set(final.ledger.refunds.map((r) => r.chargeId));
  const standing = final.ledger.charges.filter((c) => c.status === 'SUCCEEDED' && !refunded.has(c.chargeId));
  const chargesPerOrder = new Map<string, number>();
  for (const c of standing) {
    const p = paymentsByNo.get(c.paymentNo);
    const key = p ? `${p.tenant}/${p.merchantOrderNo}` : `unknown/${c.paymentNo}`;
    chargesPerOrder.set(key, (chargesPerOrder.get(key) ?? 0) + 1);
  }
  const payments: Record<string, number> = {};
  for (const p of final.payments) {
    const label = p.status === 'PROCESSING' && p.resumable ? 'PROCESSING (resumable)' : p.status;
    payments[label] = (payments[label] ?? 0) + 1;
  }
  return {
    requests: requests.length,
    answers: report.answers,
    acknowledgedOrders: ackOrders.size,
    ordersFound,
    acknowledgedPayments: ackPayments.size,
    paymentsFound,
    lost: ackOrders.size - ordersFound + (ackPayments.size - paymentsFound),
    payments,
    paidOrders: final.orders.filter((o) => o.status === 'PAID').length,
    maxChargesPerPaidOrder: Math.max(0, ...chargesPerOrder.values()),
    other5xx,
    withoutRetryAfter,
    violations: report.result.violations.map((v) => v.message),
    rounds,
  };
}

export function formatSummary(s: FailoverSummary): string {
  const lines = [
    `requests ${s.requests}; answers ${JSON.stringify(s.answers)}`,
    `writes acknowledged ${s.acknowledgedOrders + s.acknowledgedPayments} (orders ${s.acknowledgedOrders}, payments ${s.acknowledgedPayments}); found afterwards ${s.ordersFound + s.paymentsFound}; lost ${s.lost}`,
    `payments ${JSON.stringify(s.payments)}; paid orders ${s.paidOrders}; most charges on one order ${s.maxChargesPerPaidOrder}`,
    `5xx other than 503: ${s.other5xx}; 503/202 without Retry-After: ${s.withoutRetryAfter}; invariant violations: ${s.violations.length}`,
    ...s.rounds.map(
      (r) =>
        `failover ${r.round}: ${r.oldLeader} -> ${r.newLeader}; without a writable primary ${(r.withoutPrimaryMs / 1000).toFixed(1)} s; every instance served again after ${(r.untilEveryInstanceServedMs / 1000).toFixed(1)} s; ${r.oldLeader} rejoined as ${r.oldLeaderRole} in ${(r.rejoinMs / 1000).toFixed(1)} s; an instance started at the kill was ready after ${(r.startedDuringFailoverReadyMs / 1000).toFixed(1)} s`,
    ),
  ];
  return lines.join('\n');
}

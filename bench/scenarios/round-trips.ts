import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { BenchRun } from '../bench-run.js';
import type { LoadRequest } from '../load.js';
import { createOrders, seedKeys, sendAll } from '../measure.js';
import type { CapturedCall } from '../pgbench.js';
import { ask } from '../processes.js';
import { ADMIN_BASE, USERS } from '../settings.js';

export interface Counted {
  /** Client-side: pg.Client#query calls per request (one call = one round trip). */
  roundTrips: number;
  /** Server-side (pg_stat_statements): statements executed per request. */
  statements?: number;
  texts: Array<{ perRequest: number; sql: string }>;
  serverStatements?: Array<{
    perRequest: number;
    msPerRequest: number;
    planMsPerRequest: number;
    sql: string;
  }>;
}

export interface Captures {
  idempotentCreate: { calls: CapturedCall[]; uid: number; key: string };
  plainCreate: { calls: CapturedCall[]; uid: number };
}

/**
 * Round trips per request: N requests one after the other, the service's pg query calls counted by
 * the probe, statements by pg_stat_statements. Also captures one idempotent and one plain create
 * call by call (texts and values), from which the pgbench scripts are made.
 */
export async function roundTrips(ctx: BenchRun): Promise<Captures> {
  const {
    P,
    log,
    results,
    enabled,
    plainUser,
    idemUser,
    idemOrder,
    replayRequest,
    newReplayKeys,
    admins,
    users,
  } = ctx;
  const n = P.countN;
  const { sql, server, db } = ctx;
  // Let the previous load's in-flight requests finish: they must not be counted.
  await sleep(1000);
  const capture = async (request: LoadRequest): Promise<CapturedCall[]> => {
    await ask(server.child, { type: 'count-start', capture: true }, 'count-started');
    const sent = await sendAll(server.url, [request], 1);
    const got = await ask<{ captured?: CapturedCall[] }>(server.child, { type: 'count-stop' }, 'counts');
    if ((sent.statuses['201'] ?? 0) !== 1) throw new Error(`capture: ${JSON.stringify(sent.statuses)}`);
    // The payment recoverer may run in that window: its query is not part of the request.
    return (got.captured ?? []).filter((c) => !/lease_until < now\(\) AND operation/.test(c.text));
  };
  const measureCalls = async (name: string, requests: LoadRequest[], expect: number): Promise<Counted> => {
    if (db.statements) await sql.query('SELECT pg_stat_statements_reset()');
    await ask(server.child, { type: 'count-start' }, 'count-started');
    const sent = await sendAll(server.url, requests, 1);
    const counts = await ask<{ calls: number; texts: Array<[string, number]> }>(
      server.child,
      { type: 'count-stop' },
      'counts',
    );
    if ((sent.statuses[expect] ?? 0) !== requests.length) {
      throw new Error(`round trips ${name}: ${JSON.stringify(sent.statuses)}`);
    }
    const result: Counted = {
      roundTrips: counts.calls / requests.length,
      texts: counts.texts
        .filter(([, c]) => c >= requests.length / 2)
        .map(([s, c]) => ({ perRequest: c / requests.length, sql: s })),
    };
    if (db.statements) {
      const st = await sql.query<{ query: string; calls: string; ms: number; plan: number }>(
        `SELECT query, calls, total_exec_time AS ms, total_plan_time AS plan FROM pg_stat_statements
         WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
           AND query NOT ILIKE '%pg_stat_statements%' ORDER BY calls DESC`,
      );
      const per = st.rows
        .filter((r) => Number(r.calls) >= requests.length / 2)
        .map((r) => ({
          perRequest: Number(r.calls) / requests.length,
          // Execution time in the server per request (sequential requests: no lock waits).
          msPerRequest: Number((r.ms / requests.length).toFixed(4)),
          planMsPerRequest: Number((r.plan / requests.length).toFixed(4)),
          sql: r.query.replace(/\s+/g, ' ').slice(0, 140),
        }));
      result.serverStatements = per;
      result.statements = per.reduce((a, r) => a + r.perRequest, 0);
    }
    log(
      `round trips ${name}: ${result.roundTrips.toFixed(2)} per request${result.statements !== undefined ? `, ${result.statements.toFixed(2)} statements` : ''}`,
    );
    return result;
  };

  const idemKey = randomUUID();
  const captures: Captures = {
    idempotentCreate: {
      uid: ADMIN_BASE + 1,
      key: idemKey,
      calls: await capture({
        method: 'POST',
        path: '/api/v1/users',
        headers: { authorization: admins[0], 'idempotency-key': idemKey },
        body: ctx.userBody,
      }),
    },
    plainCreate: {
      uid: ADMIN_BASE + 1,
      calls: await capture({
        method: 'POST',
        path: '/api/v1/users',
        headers: { authorization: admins[0] },
        body: ctx.userBody,
      }),
    },
  };
  if (!enabled('roundtrips')) return captures;
  const out: Record<string, Counted> = {};
  out.plainCreate = await measureCalls('plain create', Array.from({ length: n }, plainUser), 201);
  out.idempotentCreate = await measureCalls('idempotent create', Array.from({ length: n }, idemUser), 201);
  const keys = newReplayKeys(n);
  await seedKeys(ctx, server.url, keys);
  out.replay = await measureCalls('replay', keys.map(replayRequest), 201);
  out.orderCreate = await measureCalls('order create', Array.from({ length: n }, idemOrder), 201);
  await createOrders(ctx, sql, 'payc', n);
  out.paymentCreate = await measureCalls(
    'payment create',
    Array.from({ length: n }, (_, i) => ({
      method: 'POST' as const,
      path: '/api/v1/payments',
      headers: { authorization: users[(i + 1) % USERS], 'idempotency-key': randomUUID() },
      body: JSON.stringify({ merchantOrderNo: `payc-${i + 1}`, amount: '10.50' }),
    })),
    201,
  );
  // A partial refund of each payment just made (their ids by merchantOrderNo).
  const paid = await sql.query<{ id: string; no: string }>(
    `SELECT id::text, merchant_order_no AS no FROM payments WHERE merchant_order_no LIKE 'payc-%' AND status = 'SUCCEEDED'`,
  );
  out.refundCreate = await measureCalls(
    'refund create',
    paid.rows.map((p) => ({
      method: 'POST' as const,
      path: `/api/v1/payments/${p.id}/refunds`,
      headers: { authorization: users[Number(p.no.slice(5)) % USERS], 'idempotency-key': randomUUID() },
      body: JSON.stringify({ amount: '1.00' }),
    })),
    201,
  );
  results.roundTrips = out;
  return captures;
}

/**
 * pgbench segments for the interleaved rounds: the SQL of one idempotent user create and of one
 * plain create (bench/pgbench.ts), same concurrency, same database, stored response of the length
 * the service stores (measured on the records the warm-up wrote).
 */

import { readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { signToken } from '../../routers/auth/jwt.js';
import { type GatewaySlot, startGatewaySlot } from '../support/gateway-slot.js';
import { type Instance, startInstance } from '../support/processes.js';
import { type CliRun, reconcileCli } from '../support/reconcile-cli.js';
import { TEST_ENV } from '../support/server.js';
import { type CheckResult, check } from './checker.js';
import type {
  Answer,
  FaultEvent,
  FinalState,
  HistoryEvent,
  Limits,
  Operation,
  RequestEvent,
  Transport,
} from './history.js';
import {
  describeFault,
  drawSchedule,
  type FailpointFault,
  faultSettings,
  PURGE_INTERVAL_MS,
  type Random,
  random,
  type ScheduledFault,
  type ScheduledKind,
  streamSeed,
} from './schedule.js';

export interface ChaosOptions {
  seed: number;
  /** How long faults are injected; clients then finish and the checker runs. */
  durationMs: number;
  /** A database of its own (the instances apply the migrations). */
  databaseUrl: string;
  instances?: number;
  clients?: number;
  /**
   * Restarts the PostgreSQL server (stop, then start on the same data): given only when the run owns
   * its server (`npm run chaos` on an embedded PostgreSQL), and then drawn like the other faults.
   */
  restartDatabase?: () => Promise<void>;
  /** Fault kinds to leave out (e.g. on a machine too slow for stops); part of what draws the schedule. */
  without?: readonly ScheduledKind[];
  /** Where the driver reads the tables (default databaseUrl): a superuser on a cluster's leader. */
  adminUrl?: string;
  /**
   * A fixed fault plan instead of the seeded schedule (test/ha/failover.test.ts): the clients run
   * until it resolves. durationMs is then ignored.
   */
  plan?: (run: PlanContext) => Promise<void>;
  log?: (line: string) => void;
}

/** What a fault plan may do while the clients run. */
export interface PlanContext {
  /** Milliseconds since the run started (the history's clock). */
  now(): number;
  /** Records a fault (or a milestone of one) in the history and the log. */
  fault(kind: FaultEvent['kind'], detail?: string): void;
  /**
   * While on, every request is disturbed (a database-wide fault: its time is not bounded by the wait
   * bound); requests open when it turns on or off are disturbed too.
   */
  disturbAll(on: boolean): void;
  /** The service instances' addresses (for probes of the plan's own). */
  instanceUrls(): string[];
  /** Starts one more instance with the run's settings (not in the clients' rotation; the plan stops it). */
  startInstance(): Promise<Instance>;
  /** The gateway simulator's fault settings. */
  setGatewayFaults(faults: Parameters<GatewaySlot['client']['setFaults']>[0]): Promise<void>;
}

export interface ChaosReport {
  seed: number;
  /** Everything recorded, and the state read at the end (for a plan's own summary). */
  history: HistoryEvent[];
  final: FinalState;
  requests: number;
  answers: Record<string, number>;
  faults: Record<string, number>;
  result: CheckResult;
  /** The fault schedule as drawn from the seed (schedule.ts), one line per fault, in order. */
  schedule: string[];
  drawn: ScheduledFault[];
  /** How often each failpoint really fired, over every process of the run (their stderr). */
  fired: Record<string, number>;
  /** What `npm run reconcile -- --repair` found and did, when the schedule made it needed. */
  reconcile?: string;
}

export const LIMITS: Limits = {
  waitMs: 300,
  leaseMs: 1500,
  gatewayTimeoutMs: 500,
  recovererIntervalMs: 200,
  maxInFlight: 4,
  slackMs: 1500,
};

const INSTANCE_ENV = (databaseUrl: string, gatewayUrl: string): Record<string, string> => ({
  DATABASE_URL: databaseUrl,
  PAYMENT_GATEWAY_URL: gatewayUrl,
  IDEMPOTENCY_WAIT_MS: String(LIMITS.waitMs),
  IDEMPOTENCY_LEASE_MS: String(LIMITS.leaseMs),
  GATEWAY_TIMEOUT_MS: String(LIMITS.gatewayTimeoutMs),
  RECOVERER_INTERVAL_MS: String(LIMITS.recovererIntervalMs),
  IDEMPOTENCY_MAX_IN_FLIGHT: String(LIMITS.maxInFlight),
  DB_POOL_MAX: '6',
  // Often enough that purge.batch fires inside a failpoint window (nothing expires in a run: the TTL
  // stays at its default, so a reused key is never forgotten under the checker).
  PURGE_INTERVAL_MS: String(PURGE_INTERVAL_MS),
  FAILPOINTS_CONTROL: '1',
});

/** One instance slot: the process that serves it now (replaced after a SIGKILL), and its state. */
interface Slot {
  instance: Instance;
  stopped: boolean;
  dead: boolean;
  /** Bumped on every stop, kill and restart: a request that saw it change was disturbed. */
  epoch: number;
}

/**
 * Runs one seeded schedule: 3 real instances on one PostgreSQL, the gateway simulator on its own
 * port, many clients (both transports, key reuse, body variants, new keys for the same order,
 * several users and tenants), and the faults drawn from the seed before the start (schedule.ts),
 * injected in order. Then heals everything, lets the clients finish (same keys; new keys for
 * resumable payments), reads the final state, repairs with reconcile when the schedule let the
 * gateway charge twice, and checks.
 *
 * Each client has a generator of its own (seeded from the seed), but what it sends follows the
 * answers it gets, so the traffic is not reproduced by the seed; the schedule is.
 */
export async function runChaos(opts: ChaosOptions): Promise<ChaosReport> {
  const instanceCount = opts.instances ?? 3;
  const drawn = opts.plan
    ? []
    : drawSchedule(opts.seed, opts.durationMs, { instances: instanceCount, without: opts.without });
  const log = opts.log ?? (() => {});
  const history: HistoryEvent[] = [];
  const t0 = Date.now();
  const now = () => Date.now() - t0;
  const gateway: GatewaySlot = await startGatewaySlot();
  await gateway.simulator();
  const env = INSTANCE_ENV(opts.databaseUrl, gateway.url);
  const slots: Slot[] = [];
  // A restart of the server or a failover ends this connection too: it reconnects.
  const admin = adminLink(opts.adminUrl ?? opts.databaseUrl);
  let seq = 0;
  let everyone = { epoch: 0, on: false };
  // Every process of the run, the replaced ones included: their stderr says which failpoints fired.
  const started: Instance[] = [];
  const spawn = async () => {
    const instance = await startInstance(env);
    started.push(instance);
    return instance;
  };
  try {
    slots.push({ instance: await spawn(), stopped: false, dead: false, epoch: 0 });
    const rest = await Promise.all(Array.from({ length: instanceCount - 1 }, spawn));
    for (const instance of rest) slots.push({ instance, stopped: false, dead: false, epoch: 0 });

    const fault = (kind: FaultEvent['kind'], instance?: number, detail?: string) => {
      history.push({ type: 'fault', at: now(), kind, instance, detail });
      log(
        `${(now() / 1000).toFixed(1)}s ${kind}${instance === undefined ? '' : ` #${instance}`}${detail ? ` ${detail}` : ''}`,
      );
    };

    // --- clients -------------------------------------------------------------------------------
    const tenants = [`chaos${opts.seed}a`, `chaos${opts.seed}b`];
    const clients = Array.from({ length: opts.clients ?? 6 }, (_, i) => ({
      id: i,
      rnd: random(streamSeed(opts.seed, `client ${i}`)),
      tenant: tenants[i % tenants.length],
      user: String(900000000 + (i % 4)),
      orders: [] as Array<{ merchantOrderNo: string; amount: string; keys: string[] }>,
      pending: [] as Array<
        Omit<RequestEvent, 'seq' | 'start' | 'end' | 'answer' | 'instance' | 'disturbed' | 'type'>
      >,
    }));
    const tokens = new Map<string, string>();
    const tokenOf = (tenant: string, user: string) => {
      const k = `${tenant}:${user}`;
      if (!tokens.has(k))
        tokens.set(
          k,
          signToken(TEST_ENV.JWT_SECRET, { tenantId: tenant, userId: user, role: 'user' }, 24 * 3600).token,
        );
      return tokens.get(k) ?? '';
    };

    async function send(
      req: (typeof clients)[number]['pending'][number],
      rnd: Random,
    ): Promise<RequestEvent> {
      const index = rnd.int(0, slots.length - 1);
      const slot = slots[index];
      const epoch = slot.epoch;
      const all = everyone;
      const start = now();
      const answer = await call(slot.instance.url, req.transport, req.op, req.body, {
        Authorization: `Bearer ${tokenOf(req.tenant, req.user)}`,
        'Idempotency-Key': req.key,
      });
      const event: RequestEvent = {
        type: 'request',
        seq: seq++,
        ...req,
        instance: index,
        start,
        end: now(),
        answer,
        disturbed: slot.epoch !== epoch || slot.stopped || slot.dead || all !== everyone || everyone.on,
      };
      history.push(event);
      return event;
    }

    const keyOf = (rnd: Random) =>
      `chaos-${opts.seed}-${seq}-${Math.floor(rnd.next() * 1e9).toString(36)}`.padEnd(20, 'x');
    let stopClients = false;
    async function clientLoop(c: (typeof clients)[number]) {
      const { rnd } = c;
      while (!stopClients) {
        const transport: Transport = rnd.chance(0.3) ? 'trpc' : 'rest';
        const roll = rnd.next();
        let req: (typeof c.pending)[number];
        if (c.orders.length === 0 || roll < 0.3) {
          const merchantOrderNo = `mo-${c.id}-${c.orders.length}`;
          const amount = `${rnd.int(1, 99)}.${rnd.pick(['00', '50', '99'])}`;
          const key = keyOf(rnd);
          c.orders.push({ merchantOrderNo, amount, keys: [] });
          req = {
            client: c.id,
            tenant: c.tenant,
            user: c.user,
            op: 'orders.create',
            transport,
            key,
            merchantOrderNo,
            body: JSON.stringify({ merchantOrderNo, amount }),
          };
        } else {
          const order = rnd.pick(c.orders);
          const reuse = order.keys.length > 0 && rnd.chance(0.5);
          const key = reuse ? rnd.pick(order.keys) : keyOf(rnd);
          if (!reuse) order.keys.push(key);
          // A variant: the same key with another amount (a mismatch), or a new key with it (400/40902).
          const amount = rnd.chance(0.08) ? '1234.56' : order.amount;
          req = {
            client: c.id,
            tenant: c.tenant,
            user: c.user,
            op: 'payments.create',
            transport,
            key,
            merchantOrderNo: order.merchantOrderNo,
            body: JSON.stringify({ merchantOrderNo: order.merchantOrderNo, amount }),
          };
        }
        const event = await send(req, rnd);
        // Some clients give up on a key answered 503 (nothing was charged) and come back later with
        // a new one: the payment must then be resumable by that new key.
        const givesUp = event.answer.kind === 'error' && event.answer.httpStatus === 503 && rnd.chance(0.3);
        if (!finalAnswer(event.answer) && !givesUp) c.pending.push(req);
        if (givesUp) for (const o of c.orders) o.keys = o.keys.filter((k) => k !== req.key);
        // Retry some pending ones now, with the same key and body.
        if (c.pending.length > 0 && rnd.chance(0.4)) {
          const again = c.pending.shift();
          if (again) {
            const retried = await send(again, rnd);
            if (!finalAnswer(retried.answer)) c.pending.push(again);
          }
        }
        await sleep(rnd.int(5, 60));
      }
    }

    // --- faults: the drawn schedule, in order ------------------------------------------------------
    let reconcileNeeded = false;
    const alive = (slot: Slot) =>
      slot.instance.child.exitCode === null && slot.instance.child.signalCode === null;
    const arm = (slot: Slot, spec: string) =>
      fetch(`${slot.instance.url}/__failpoints`, { method: 'PUT', body: spec }).then(
        () => {},
        () => {},
      );

    /**
     * A failpoint window: armed on the target (and the others, when the fault says so), with the
     * gateway's faults of the window. Every instance armed may freeze, die or stall at any moment:
     * its requests are disturbed (not bounded) until the window ends and it is healed.
     */
    async function failpointWindow(f: ScheduledFault, fp: FailpointFault, holdMs: number) {
      const target = f.instance ?? 0;
      const armed = slots.map((_, i) => i).filter((i) => i === target || fp.others !== undefined);
      for (const i of armed) {
        slots[i].stopped = true;
        slots[i].epoch++;
      }
      if (fp.gateway) await gateway.client.setFaults(fp.gateway);
      fault(f.kind === 'gateway-ignore-key' ? 'gateway-ignore-key' : 'failpoint', target, faultSettings(f));
      await Promise.all(armed.map((i) => arm(slots[i], i === target ? fp.spec : (fp.others ?? ''))));
      await sleep(holdMs);
      if (fp.gateway) {
        await gateway.client.setFaults({});
        fault('gateway-heal');
      }
      await Promise.all(
        armed.map(async (i) => {
          const slot = slots[i];
          if (processState(slot.instance.pid) === 'T') {
            process.kill(slot.instance.pid, 'SIGCONT');
            fault('sigcont', i, 'frozen by its failpoint');
          }
          if (!alive(slot)) {
            fault('restart', i, 'killed by its failpoint');
            slot.instance = await spawn();
          } else await arm(slot, '');
          slot.stopped = false;
          slot.epoch++;
        }),
      );
    }

    async function inject(f: ScheduledFault) {
      const hold = f.holdMs ?? 0;
      const slot = f.instance === undefined ? undefined : slots[f.instance];
      if (f.kind === 'sigkill' && slot && f.instance !== undefined) {
        slot.dead = true;
        slot.epoch++;
        fault('sigkill', f.instance);
        slot.instance.kill();
        await slot.instance.exited;
        await sleep(hold);
        slot.instance = await spawn();
        slot.dead = false;
        slot.epoch++;
        fault('restart', f.instance);
      } else if (f.kind === 'sigstop' && slot && f.instance !== undefined) {
        slot.stopped = true;
        slot.epoch++;
        fault('sigstop', f.instance, `${hold} ms`);
        process.kill(slot.instance.pid, 'SIGSTOP');
        await sleep(hold);
        process.kill(slot.instance.pid, 'SIGCONT');
        slot.stopped = false;
        slot.epoch++;
        fault('sigcont', f.instance);
      } else if ((f.kind === 'failpoint' || f.kind === 'gateway-ignore-key') && f.failpoint) {
        if (f.kind === 'gateway-ignore-key') reconcileNeeded = true;
        await failpointWindow(f, f.failpoint, hold);
      } else if (f.kind === 'pg-restart') {
        if (!opts.restartDatabase) {
          log(`${(now() / 1000).toFixed(1)}s pg-restart skipped: the run does not own its PostgreSQL`);
          return;
        }
        fault('pg-restart');
        await opts.restartDatabase();
      } else if (f.kind === 'db-connections-dropped') {
        fault(f.kind);
        await admin.query(
          'SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()',
        );
      } else if (f.kind === 'gateway-unreachable') {
        fault(f.kind, undefined, `${hold} ms`);
        await gateway.unreachable();
        await sleep(hold);
        await gateway.reachable();
        fault('gateway-reachable');
      } else if (f.gateway) {
        fault(f.kind, undefined, JSON.stringify(f.gateway));
        await gateway.client.setFaults(f.gateway);
        await sleep(hold);
        await gateway.client.setFaults({});
        fault('gateway-heal');
      }
    }

    async function faultLoop() {
      for (const f of drawn) {
        await sleep(f.gapMs);
        await inject(f);
      }
    }

    let faultsOver = false;
    async function sampleLoop() {
      while (!faultsOver) {
        const { rows } = await admin
          .query<{ user_scope: string; n: string }>(
            `SELECT user_scope, count(*) AS n FROM idempotency_records WHERE status = 'PROCESSING'
             GROUP BY user_scope ORDER BY count(*) DESC LIMIT 1`,
          )
          .catch(() => ({ rows: [] as Array<{ user_scope: string; n: string }> }));
        history.push({
          type: 'sample',
          at: now(),
          maxProcessingPerUser: Number(rows[0]?.n ?? 0),
          user: rows[0]?.user_scope ?? null,
        });
        await sleep(100);
      }
    }

    const plan: PlanContext = {
      now,
      fault: (kind, detail) => fault(kind, undefined, detail),
      disturbAll(on) {
        everyone = { epoch: everyone.epoch + 1, on };
      },
      instanceUrls: () => slots.map((s) => s.instance.url),
      startInstance: () => startInstance(env),
      setGatewayFaults: async (faults) => {
        await gateway.client.setFaults(faults);
      },
    };
    const running = clients.map(clientLoop);
    const sampling = sampleLoop();
    await (opts.plan ? opts.plan(plan) : faultLoop()).finally(() => {
      faultsOver = true;
    });
    await sampling;
    stopClients = true;
    await Promise.all(running);

    // --- heal, then let every client finish ----------------------------------------------------------
    await gateway.client.setFaults({});
    for (const slot of slots)
      if (processState(slot.instance.pid) === 'T') process.kill(slot.instance.pid, 'SIGCONT');
    await sleep(LIMITS.leaseMs + 4 * LIMITS.recovererIntervalMs);
    const finalRnd = random(streamSeed(opts.seed, 'final'));
    const deadline = Date.now() + 60000;
    for (const c of clients) {
      for (const req of c.pending) {
        while (Date.now() < deadline) {
          const event = await send(req, finalRnd);
          if (finalAnswer(event.answer) || (event.answer.kind === 'error' && event.answer.code === 40901))
            break;
          await sleep(100);
        }
      }
    }
    // Resumable payments: their client comes back with a new key (CONTRACT section 3).
    const { rows: resumable } = await admin.query<{
      tenant: string;
      merchant_order_no: string;
      amount: string;
      user_id: string;
    }>(
      `SELECT merchant_id AS tenant, merchant_order_no, amount::text AS amount, user_id::text AS user_id FROM payments
       WHERE status = 'PROCESSING' AND merchant_id = ANY($1)`,
      [tenants],
    );
    for (const p of resumable) {
      const c = clients.find((x) => x.tenant === p.tenant && x.user === p.user_id) ?? clients[0];
      const req = {
        client: c.id,
        tenant: p.tenant,
        user: p.user_id,
        op: 'payments.create' as Operation,
        transport: 'rest' as Transport,
        key: keyOf(finalRnd),
        merchantOrderNo: p.merchant_order_no,
        body: JSON.stringify({ merchantOrderNo: p.merchant_order_no, amount: p.amount }),
      };
      while (Date.now() < deadline) {
        const event = await send(req, finalRnd);
        if (finalAnswer(event.answer)) break;
        await sleep(100);
      }
    }
    await sleep(LIMITS.leaseMs + 4 * LIMITS.recovererIntervalMs);

    // The tables as the service left them; the ledger after the repair, when one ran: reconcile may
    // only refund a second charge, and anything else it would have had to finish shows up here.
    const final = await finalState(admin, gateway, tenants);
    let reconcile: string | undefined;
    if (reconcileNeeded) {
      reconcile = summarizeReconcile(
        await reconcileCli(opts.databaseUrl, gateway.url, ['--repair', '--json']),
      );
      fault('reconcile-repair', undefined, reconcile);
      final.ledger = await gateway.ledger();
    }
    const result = check(history, final, LIMITS);
    const requests = history.filter((e): e is RequestEvent => e.type === 'request');
    const answers: Record<string, number> = {};
    for (const r of requests) {
      const label =
        r.answer.kind === 'ok'
          ? `${r.answer.httpStatus}`
          : r.answer.kind === 'error'
            ? `${r.answer.httpStatus}/${r.answer.code}`
            : r.answer.kind;
      answers[label] = (answers[label] ?? 0) + 1;
    }
    const faults: Record<string, number> = {};
    for (const f of history) if (f.type === 'fault') faults[f.kind] = (faults[f.kind] ?? 0) + 1;
    return {
      seed: opts.seed,
      history,
      final,
      requests: requests.length,
      answers,
      faults,
      result,
      schedule: drawn.map(describeFault),
      drawn,
      fired: firedFailpoints(started),
      reconcile,
    };
  } finally {
    for (const slot of slots) {
      if (slot.stopped) process.kill(slot.instance.pid, 'SIGCONT');
      slot.instance.kill();
      await slot.instance.exited;
    }
    await admin.end();
    await gateway.close();
  }
}

/** What reconcile --repair --json reported: its entries counted by kind and outcome, and its exit code. */
function summarizeReconcile(run: CliRun): string {
  try {
    const report = JSON.parse(run.stdout) as { entries: Array<{ kind: string; outcome: string }> };
    const counts: Record<string, number> = {};
    for (const e of report.entries)
      counts[`${e.kind} ${e.outcome}`] = (counts[`${e.kind} ${e.outcome}`] ?? 0) + 1;
    return `exit ${run.code}, ${JSON.stringify(counts)}`;
  } catch {
    return `exit ${run.code}: ${run.stderr.trim().slice(0, 200)}`;
  }
}

/** Failpoint firings of every process of the run, as core/failpoints.ts writes them to stderr. */
function firedFailpoints(instances: Instance[]): Record<string, number> {
  const fired: Record<string, number> = {};
  for (const instance of instances)
    for (const m of instance.output().matchAll(/^failpoint (\S+) fired: /gm))
      fired[m[1]] = (fired[m[1]] ?? 0) + 1;
  return fired;
}

/** The process state letter from /proc (T: stopped), or '?' once it is gone. */
function processState(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.[0] ?? '?';
  } catch {
    return '?';
  }
}

const finalAnswer = (a: Answer) =>
  a.kind === 'ok' ||
  (a.kind === 'error' &&
    a.httpStatus !== 503 &&
    a.httpStatus !== 429 &&
    a.httpStatus < 500 &&
    a.code !== 40901);

/** One call on either transport, normalised; a lost answer after 10 s (a stopped instance). */
async function call(
  base: string,
  transport: Transport,
  op: Operation,
  body: string,
  headers: Record<string, string>,
): Promise<Answer> {
  const path =
    transport === 'rest' ? (op === 'orders.create' ? '/api/v1/orders' : '/api/v1/payments') : `/trpc/${op}`;
  let res: Response;
  let text: string;
  try {
    res = await fetch(`${base}${path}`, {
      method: 'POST',
      headers: { ...headers, 'content-type': 'application/json' },
      body,
      signal: AbortSignal.timeout(10000),
    });
    text = await res.text();
  } catch (err) {
    return { kind: 'lost', reason: String((err as Error).cause ?? err).slice(0, 80) };
  }
  const retryAfter = res.headers.get('retry-after') !== null;
  const replayed = res.headers.get('idempotent-replayed') === 'true';
  let json: Record<string, unknown> = {};
  try {
    json = JSON.parse(text);
  } catch {
    return {
      kind: 'error',
      httpStatus: res.status,
      code: res.status,
      message: text.slice(0, 80),
      retryAfter,
      replayed,
    };
  }
  if (res.status === 202) return { kind: 'processing', retryAfter, location: res.headers.get('location') };
  if (transport === 'rest') {
    if (res.status < 300) return { kind: 'ok', httpStatus: res.status, data: json.data, replayed };
    return {
      kind: 'error',
      httpStatus: res.status,
      code: Number(json.code),
      message: String(json.message),
      retryAfter,
      replayed,
    };
  }
  const result = json.result as { data?: { data?: unknown } } | undefined;
  // tRPC has no 202: "still processing" is a result whose data is the processing marker.
  const data = result?.data?.data as { status?: string; resourceId?: string } | undefined;
  if (data && data.status === 'PROCESSING' && 'resourceId' in data)
    return { kind: 'processing', retryAfter, location: res.headers.get('location') };
  if (result) return { kind: 'ok', httpStatus: res.status, data: result.data?.data, replayed };
  const error = json.error as
    | { message?: string; data?: { httpStatus?: number; businessCode?: number } }
    | undefined;
  return {
    kind: 'error',
    httpStatus: error?.data?.httpStatus ?? res.status,
    code: Number(error?.data?.businessCode ?? res.status),
    message: String(error?.message),
    retryAfter,
    replayed,
  };
}

/** One connection for the driver's own reads, opened again after the server ended it. */
function adminLink(url: string) {
  let client: pg.Client | undefined;
  const drop = () => {
    const c = client;
    client = undefined;
    c?.end().catch(() => {});
  };
  return {
    async query<R extends pg.QueryResultRow>(sql: string, params?: unknown[]): Promise<pg.QueryResult<R>> {
      for (let attempt = 0; ; attempt++) {
        try {
          if (!client) {
            const c = new pg.Client(url);
            c.on('error', drop);
            client = c;
            await c.connect();
          }
          return await client.query<R>(sql, params);
        } catch (err) {
          drop();
          if (attempt >= 2) throw err;
          await sleep(200);
        }
      }
    },
    async end() {
      await client?.end().catch(() => {});
      client = undefined;
    },
  };
}
type AdminLink = ReturnType<typeof adminLink>;

async function finalState(admin: AdminLink, gateway: GatewaySlot, tenants: string[]): Promise<FinalState> {
  const processing = await admin.query<{ scope_key: string; age: number }>(
    `SELECT scope_key, (EXTRACT(EPOCH FROM now() - created_at) * 1000)::int AS age FROM idempotency_records
     WHERE status = 'PROCESSING' AND split_part(scope_key, ':', 1) = ANY($1)`,
    [tenants],
  );
  // One statement, so one snapshot: the rows and their events as of the same moment.
  const tables = await admin.query<Pick<FinalState, 'payments' | 'orders' | 'events'>>(
    `SELECT
       (SELECT coalesce(json_agg(json_build_object('id', id, 'paymentNo', payment_no, 'tenant', merchant_id,
                 'merchantOrderNo', merchant_order_no, 'status', status, 'chargeId', charge_id,
                 'amount', amount::text, 'resumable', resumable_since IS NOT NULL)), '[]')
          FROM payments WHERE merchant_id = ANY($1)) AS payments,
       (SELECT coalesce(json_agg(json_build_object('id', id::text, 'tenant', tenant_id,
                 'merchantOrderNo', merchant_order_no, 'status', status, 'amount', amount::text)), '[]')
          FROM orders WHERE tenant_id = ANY($1)) AS orders,
       (SELECT coalesce(json_agg(json_build_object('id', id, 'tenant', tenant_id, 'type', type,
                 'resourceId', resource_id) ORDER BY tx_id, seq), '[]')
          FROM events WHERE tenant_id = ANY($1)) AS events`,
    [tenants],
  );
  const { payments, orders, events } = tables.rows[0];
  const ledger = await gateway.ledger();
  return {
    processingRecords: processing.rows.map((r) => ({ scopeKey: r.scope_key, ageMs: r.age })),
    payments,
    orders,
    events,
    ledger,
  };
}

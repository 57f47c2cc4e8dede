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
  ExportRow,
  FaultEvent,
  FinalExport,
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
  /**
   * Whether the clients also make refunds and exports (default true). The failover test leaves them
   * out: its load and its bounds (every instance serving within 120 s of a leader's death) are those
   * of orders and payments; refunds' bursts also meet the per-user in-flight cap (429) while a
   * failover holds records PROCESSING.
   */
  effects?: boolean;
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
      /** Its SUCCEEDED payments (what it may refund). */
      paid: [] as Array<{ id: string; merchantOrderNo: string; amount: string }>,
      /** Refund and export requests it sent (some are sent again: a replay, or another body). */
      sentAgain: [] as Array<
        Omit<RequestEvent, 'seq' | 'start' | 'end' | 'answer' | 'instance' | 'disturbed' | 'type'>
      >,
      /** Exports it was answered 202 for and has not seen final yet. */
      watching: [] as string[],
    }));
    const tokens = new Map<string, string>();
    const tokenOf = (tenant: string, user: string, role: 'user' | 'admin' = 'user') => {
      const k = `${tenant}:${user}:${role}`;
      if (!tokens.has(k))
        tokens.set(
          k,
          signToken(TEST_ENV.JWT_SECRET, { tenantId: tenant, userId: user, role }, 24 * 3600).token,
        );
      return tokens.get(k) ?? '';
    };
    /** Files downloaded while the run went on, by export id (compared with the query at the end). */
    const downloads = new Map<string, ExportRow[][]>();

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
        Authorization: `Bearer ${tokenOf(req.tenant, req.user, req.role)}`,
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
        if (c.watching.length > 0 && rnd.chance(0.3)) await watchExport(c, rnd);
        if (
          opts.effects !== false &&
          c.orders.length > 0 &&
          roll >= 0.25 &&
          roll < 0.4 &&
          (c.paid.length > 0 || c.sentAgain.length > 0)
        ) {
          await refundOrExport(c, rnd, transport, 'refunds.create');
          await sleep(rnd.int(5, 60));
          continue;
        }
        if (opts.effects !== false && c.orders.length > 0 && roll >= 0.4 && roll < 0.45) {
          await refundOrExport(c, rnd, transport, 'exports.create');
          await sleep(rnd.int(5, 60));
          continue;
        }
        if (c.orders.length === 0 || roll < 0.25) {
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
        noteAnswer(c, event);
        // Some clients give up on a key answered 503 (nothing was charged) and come back later with
        // a new one: the payment must then be resumable by that new key.
        const givesUp = event.answer.kind === 'error' && event.answer.httpStatus === 503 && rnd.chance(0.3);
        if (!finalAnswer(event) && !givesUp) c.pending.push(req);
        if (givesUp) for (const o of c.orders) o.keys = o.keys.filter((k) => k !== req.key);
        await retrySome(c, rnd);
        await sleep(rnd.int(5, 60));
      }
    }

    /** Retries some pending request now, with the same key and body. */
    async function retrySome(c: (typeof clients)[number], rnd: Random) {
      if (c.pending.length > 0 && rnd.chance(0.4)) {
        const again = c.pending.shift();
        if (again) {
          const retried = await send(again, rnd);
          noteAnswer(c, retried);
          if (!finalAnswer(retried)) c.pending.push(again);
        }
      }
    }

    /** What a client learns from an answer: a payment it may refund, an export to watch. */
    function noteAnswer(c: (typeof clients)[number], event: RequestEvent) {
      const a = event.answer;
      if (event.op === 'payments.create' && a.kind === 'ok') {
        const p = a.data as { id?: string; status?: string; amount?: string };
        if (p.id && p.status === 'SUCCEEDED' && p.amount && !c.paid.some((x) => x.id === p.id))
          c.paid.push({ id: p.id, merchantOrderNo: event.merchantOrderNo, amount: p.amount });
      }
      if (
        event.op === 'exports.create' &&
        a.kind === 'processing' &&
        a.resourceId &&
        !c.watching.includes(a.resourceId)
      )
        c.watching.push(a.resourceId);
    }

    /**
     * A refund (a new key: a part, or the rest; sometimes two or three at once on one payment, on
     * any instances) or an export (orders or payments, CSV or NDJSON, sometimes an admin's); or one
     * sent before again: the same body (a replay) or, rarely, another one under its key (40901).
     */
    async function refundOrExport(
      c: (typeof clients)[number],
      rnd: Random,
      transport: Transport,
      op: Operation,
    ) {
      const earlier = c.sentAgain.filter((r) => r.op === op);
      if (earlier.length > 0 && rnd.chance(0.2)) {
        const again = { ...rnd.pick(earlier), transport };
        if (rnd.chance(0.2)) {
          const body = JSON.parse(again.body) as Record<string, unknown>;
          if (op === 'refunds.create') body.amount = '0.01';
          else body.format = body.format === 'csv' ? 'ndjson' : 'csv';
          again.body = JSON.stringify(body);
        }
        const event = await send(again, rnd);
        noteAnswer(c, event);
        if (!finalAnswer(event)) c.pending.push(again);
        return;
      }
      const base = { client: c.id, tenant: c.tenant, user: c.user, op, transport };
      if (op === 'exports.create') {
        const req = {
          ...base,
          ...(rnd.chance(0.3) ? { role: 'admin' as const } : {}),
          key: keyOf(rnd),
          merchantOrderNo: '',
          body: JSON.stringify({
            resource: rnd.pick(['orders', 'payments']),
            format: rnd.pick(['csv', 'ndjson']),
          }),
        };
        c.sentAgain.push(req);
        const event = await send(req, rnd);
        noteAnswer(c, event);
        if (!finalAnswer(event)) c.pending.push(req);
        return;
      }
      if (c.paid.length === 0) return;
      const p = rnd.pick(c.paid);
      const refundOf = () => {
        // The rest (no amount), or a part: a few units, at most the payment's amount.
        const part = rnd.chance(0.3)
          ? undefined
          : `${rnd.int(1, Math.max(1, Math.floor(Number(p.amount) / 3)))}.${rnd.pick(['00', '25'])}`;
        const req = {
          ...base,
          transport: rnd.chance(0.3) ? ('trpc' as const) : ('rest' as const),
          key: keyOf(rnd),
          merchantOrderNo: p.merchantOrderNo,
          body: JSON.stringify(part === undefined ? { id: p.id } : { id: p.id, amount: part }),
        };
        c.sentAgain.push(req);
        return req;
      };
      const burst = rnd.chance(0.3) ? Array.from({ length: rnd.int(2, 3) }, refundOf) : [refundOf()];
      const events = await Promise.all(burst.map((req) => send(req, random(streamSeed(c.id, req.key)))));
      for (const [i, event] of events.entries()) if (!finalAnswer(event)) c.pending.push(burst[i]);
    }

    /** Polls one export the client watches; once SUCCEEDED, downloads its file (kept for the checker). */
    async function watchExport(c: (typeof clients)[number], rnd: Random) {
      const id = c.watching[0];
      const creator = history.find(
        (e): e is RequestEvent =>
          e.type === 'request' &&
          e.op === 'exports.create' &&
          e.answer.kind === 'processing' &&
          e.answer.resourceId === id,
      );
      const base = slots[rnd.int(0, slots.length - 1)].instance.url;
      const auth = { Authorization: `Bearer ${tokenOf(c.tenant, c.user, creator?.role)}` };
      const status = await fetch(`${base}/api/v1/exports/${id}`, {
        headers: auth,
        signal: AbortSignal.timeout(5000),
      })
        .then((r) => r.json() as Promise<{ data?: { status?: string } }>)
        .then((j) => j.data?.status)
        .catch(() => undefined);
      if (status === undefined || status === 'PROCESSING') return;
      c.watching.shift();
      if (status === 'SUCCEEDED') {
        const file = await downloadFile(base, id, auth);
        if (typeof file !== 'string') downloads.set(id, [...(downloads.get(id) ?? []), file]);
      }
    }

    // --- faults: the drawn schedule, in order ------------------------------------------------------
    let reconcileNeeded = false;
    const alive = (slot: Slot) =>
      slot.instance.child.exitCode === null && slot.instance.child.signalCode === null;
    /** Arms (or with '' disarms) the slot's failpoints; false when its process did not answer. */
    const arm = (slot: Slot, spec: string) =>
      fetch(`${slot.instance.url}/__failpoints`, { method: 'PUT', body: spec }).then(
        (res) => res.ok,
        () => false,
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
          // Thawed, it may run on into a sigkill failpoint before the disarm lands: then the disarm
          // finds no process, and the slot is restarted once the process is gone.
          if (!alive(slot) || !(await arm(slot, ''))) {
            await Promise.race([slot.instance.exited, sleep(5000)]);
            if (!alive(slot)) {
              fault('restart', i, 'killed by its failpoint');
              slot.instance = await spawn();
            }
          }
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
    let deadline = Date.now() + 60000;
    const unfinished: string[] = [];
    for (const c of clients) {
      for (const req of c.pending) {
        let last: RequestEvent | undefined;
        while (Date.now() < deadline) {
          last = await send(req, finalRnd);
          if (finalAnswer(last) || (last.answer.kind === 'error' && last.answer.code === 40901)) break;
          await sleep(100);
        }
        if (last && !finalAnswer(last) && !(last.answer.kind === 'error' && last.answer.code === 40901))
          unfinished.push(`${req.op} ${req.key} (last: ${JSON.stringify(last.answer)})`);
      }
    }
    // Said, so that a run whose clients could not finish shows why (the checker then reports what
    // was left behind); the resumable payments below get a deadline of their own.
    if (unfinished.length > 0)
      log(
        `heal: ${unfinished.length} pending request(s) without a final answer after 60 s: ${unfinished.slice(0, 5).join('; ')}`,
      );
    deadline = Date.now() + 60000;
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
        if (finalAnswer(event)) break;
        await sleep(100);
      }
    }
    await sleep(LIMITS.leaseMs + 4 * LIMITS.recovererIntervalMs);
    // Exports run in the background: they are waited for (an export left PROCESSING is a violation).
    while (Date.now() < deadline) {
      const { rows } = await admin.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM exports WHERE status = 'PROCESSING' AND tenant_id = ANY($1)`,
        [tenants],
      );
      if (rows[0].n === 0) break;
      await sleep(200);
    }

    // The tables as the service left them; the ledger after the repair, when one ran: reconcile may
    // only refund a second charge, and anything else it would have had to finish shows up here.
    const final = await finalState(admin, gateway, tenants, slots[0].instance.url, tokenOf, downloads, t0);
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
      // Its process may be gone already (killed by a failpoint): the error that got here must show.
      if (slot.stopped)
        try {
          process.kill(slot.instance.pid, 'SIGCONT');
        } catch {}
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

/** Whether a client is done with a request: a final answer, or an export's 202 (its key's stored answer). */
const finalAnswer = ({ op, answer: a }: Pick<RequestEvent, 'op' | 'answer'>) =>
  a.kind === 'ok' ||
  (a.kind === 'processing' && op === 'exports.create') ||
  (a.kind === 'error' &&
    a.httpStatus !== 503 &&
    a.httpStatus !== 429 &&
    a.httpStatus < 500 &&
    a.code !== 40901);

const PATHS: Record<Operation, (input: Record<string, unknown>) => string> = {
  'orders.create': () => '/api/v1/orders',
  'payments.create': () => '/api/v1/payments',
  'refunds.create': (input) => `/api/v1/payments/${encodeURIComponent(String(input.id))}/refunds`,
  'exports.create': () => '/api/v1/exports',
};

/** One call on either transport, normalised; a lost answer after 10 s (a stopped instance). */
async function call(
  base: string,
  transport: Transport,
  op: Operation,
  body: string,
  headers: Record<string, string>,
): Promise<Answer> {
  // A refund's body is its tRPC input; over REST the payment's id is in the path.
  const input = JSON.parse(body) as Record<string, unknown>;
  const path = transport === 'rest' ? PATHS[op](input) : `/trpc/${op}`;
  let sent = body;
  if (transport === 'rest' && op === 'refunds.create') {
    const { id: _id, ...rest } = input;
    sent = JSON.stringify(rest);
  }
  let res: Response;
  let text: string;
  try {
    res = await fetch(`${base}${path}`, {
      method: 'POST',
      headers: { ...headers, 'content-type': 'application/json' },
      body: sent,
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
  if (res.status === 202)
    return {
      kind: 'processing',
      retryAfter,
      location: res.headers.get('location'),
      resourceId: (json.data as { resourceId?: string } | undefined)?.resourceId,
    };
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
    return {
      kind: 'processing',
      retryAfter,
      location: res.headers.get('location'),
      resourceId: data.resourceId,
    };
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

async function finalState(
  admin: AdminLink,
  gateway: GatewaySlot,
  tenants: string[],
  baseUrl: string,
  tokenOf: (tenant: string, user: string, role?: 'user' | 'admin') => string,
  downloads: Map<string, ExportRow[][]>,
  t0: number,
): Promise<FinalState> {
  const processing = await admin.query<{ scope_key: string; age: number }>(
    `SELECT scope_key, (EXTRACT(EPOCH FROM now() - created_at) * 1000)::int AS age FROM idempotency_records
     WHERE status = 'PROCESSING' AND split_part(scope_key, ':', 1) = ANY($1)`,
    [tenants],
  );
  // One statement, so one snapshot: the rows and their events as of the same moment.
  const tables = await admin.query<
    Pick<FinalState, 'payments' | 'orders' | 'events' | 'refunds'> & { exports: ExportScopeRow[] }
  >(
    `SELECT
       (SELECT coalesce(json_agg(json_build_object('id', id, 'paymentNo', payment_no, 'tenant', merchant_id,
                 'merchantOrderNo', merchant_order_no, 'status', status, 'chargeId', charge_id,
                 'amount', amount::text, 'resumable', resumable_since IS NOT NULL,
                 'amountRefunded', amount_refunded::text)), '[]')
          FROM payments WHERE merchant_id = ANY($1)) AS payments,
       (SELECT coalesce(json_agg(json_build_object('id', id, 'refundNo', refund_no, 'paymentId', payment_id,
                 'tenant', merchant_id, 'status', status, 'amount', amount::text,
                 'failureReason', failure_reason)), '[]')
          FROM refunds WHERE merchant_id = ANY($1)) AS refunds,
       (SELECT coalesce(json_agg(json_build_object('id', id::text, 'tenant', tenant_id, 'user', user_id::text,
                 'allUsers', all_users, 'resource', resource, 'format', format, 'status', status,
                 'snapshotAt', snapshot_at, 'createdFrom', created_from, 'createdTo', created_to)), '[]')
          FROM exports WHERE tenant_id = ANY($1)) AS exports,
       (SELECT coalesce(json_agg(json_build_object('id', id::text, 'tenant', tenant_id,
                 'merchantOrderNo', merchant_order_no, 'status', status, 'amount', amount::text)), '[]')
          FROM orders WHERE tenant_id = ANY($1)) AS orders,
       (SELECT coalesce(json_agg(json_build_object('id', id, 'tenant', tenant_id, 'type', type,
                 'resourceId', resource_id, 'at', EXTRACT(EPOCH FROM created_at) * 1000 - $2)
                 ORDER BY tx_id, seq), '[]')
          FROM events WHERE tenant_id = ANY($1)) AS events`,
    [tenants, t0],
  );
  const { payments, orders, events, refunds } = tables.rows[0];
  const exports: FinalExport[] = [];
  for (const e of tables.rows[0].exports) {
    const auth = { Authorization: `Bearer ${tokenOf(e.tenant, e.user, e.allUsers ? 'admin' : 'user')}` };
    exports.push({
      id: e.id,
      tenant: e.tenant,
      resource: e.resource,
      format: e.format,
      status: e.status,
      file: e.status === 'SUCCEEDED' ? await downloadFile(baseUrl, e.id, auth) : null,
      earlier: downloads.get(e.id) ?? [],
      query: await exportQuery(admin, e),
    });
  }
  const ledger = await gateway.ledger();
  return {
    processingRecords: processing.rows.map((r) => ({ scopeKey: r.scope_key, ageMs: r.age })),
    payments,
    orders,
    events,
    refunds,
    exports,
    ledger,
  };
}

/** An export's row as the final state reads it: what selects its rows (CONTRACT section 11). */
interface ExportScopeRow {
  id: string;
  tenant: string;
  user: string;
  allUsers: boolean;
  resource: 'orders' | 'payments';
  format: 'csv' | 'ndjson';
  status: string;
  snapshotAt: string;
  createdFrom: string | null;
  createdTo: string | null;
}

/**
 * The direct query an export's file must equal, written here on its own (not the service's): the
 * tenant's rows (an admin's export) or the creator's, created at or before the export's snapshot_at
 * and within its filter, in id order (docs/DECISIONS.md, the snapshot rule).
 */
async function exportQuery(admin: AdminLink, e: ExportScopeRow): Promise<ExportRow[]> {
  const table = e.resource === 'orders' ? 'orders' : 'payments';
  const tenantColumn = e.resource === 'orders' ? 'tenant_id' : 'merchant_id';
  const { rows } = await admin.query<ExportRow>(
    `SELECT id::text AS id, merchant_order_no AS "merchantOrderNo", amount::text AS amount FROM ${table}
      WHERE ${tenantColumn} = $1 AND created_at <= $2 AND ($3::bigint IS NULL OR user_id = $3::bigint)
        AND ($4::timestamptz IS NULL OR created_at >= $4) AND ($5::timestamptz IS NULL OR created_at <= $5)
      ORDER BY ${table}.id`,
    [e.tenant, e.snapshotAt, e.allUsers ? null : e.user, e.createdFrom, e.createdTo],
  );
  return rows;
}

/** GET /api/v1/exports/{id}/file, parsed (CSV or NDJSON) to its rows in file order; a string: what failed. */
async function downloadFile(
  base: string,
  id: string,
  headers: Record<string, string>,
): Promise<ExportRow[] | string> {
  try {
    const res = await fetch(`${base}/api/v1/exports/${id}/file`, {
      headers,
      signal: AbortSignal.timeout(20000),
    });
    const text = await res.text();
    if (res.status !== 200) return `${res.status} ${text.slice(0, 120)}`;
    const type = res.headers.get('content-type') ?? '';
    const objects = type.startsWith('application/x-ndjson')
      ? text
          .split('\n')
          .filter((line) => line !== '')
          .map((line) => JSON.parse(line) as Record<string, unknown>)
      : csvObjects(text);
    return objects.map((o) => ({
      id: String(o.id),
      merchantOrderNo: String(o.merchantOrderNo),
      amount: String(o.amount),
    }));
  } catch (err) {
    return String(err).slice(0, 200);
  }
}

/** RFC 4180 records (a header line, then one object per record); quoted fields may hold commas, quotes, breaks. */
export function csvObjects(text: string): Array<Record<string, string>> {
  const records: string[][] = [];
  let field = '';
  let record: string[] = [];
  let quoted = false;
  for (let i = 0; i < text.length; i++) {
    const ch = text[i];
    if (quoted) {
      if (ch === '"' && text[i + 1] === '"') {
        field += '"';
        i++;
      } else if (ch === '"') quoted = false;
      else field += ch;
    } else if (ch === '"') quoted = true;
    else if (ch === ',') {
      record.push(field);
      field = '';
    } else if (ch === '\r' && text[i + 1] === '\n') {
      record.push(field);
      records.push(record);
      field = '';
      record = [];
      i++;
    } else field += ch;
  }
  if (field !== '' || record.length > 0) records.push([...record, field]);
  const [header, ...rest] = records;
  return rest.map((r) => Object.fromEntries((header ?? []).map((name, i) => [name, r[i] ?? ''])));
}

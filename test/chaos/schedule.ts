import type { Faults } from '../../gateway/types.js';

/**
 * The fault schedule of a chaos run, drawn from its seed before the run starts, by a generator of
 * its own: the same seed and options give the same list of faults (kinds, gaps, holds, targets,
 * failpoint specifications, gateway settings), whatever the processes do meanwhile. The driver
 * (driver.ts) injects them in this order. What is not in it, and not reproduced by a seed: what the
 * clients send and when (their generators are seeded too, but their choices follow the answers and
 * the timing), and whether a failpoint's condition is met while it is armed (it fires only when a
 * request or a background job reaches that step).
 */

/** A small seeded generator (mulberry32). */
export function random(seed: number) {
  let s = seed >>> 0;
  const next = () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return {
    next,
    int: (lo: number, hi: number) => lo + Math.floor(next() * (hi - lo + 1)),
    pick: <T>(items: readonly T[]): T => items[Math.floor(next() * items.length)],
    chance: (p: number) => next() < p,
  };
}
export type Random = ReturnType<typeof random>;

/** The seed of one independent stream of a run (FNV-1a of "seed:stream"): schedule, client 3, ... */
export function streamSeed(seed: number, stream: string): number {
  let h = 0x811c9dc5;
  for (const ch of `${seed}:${stream}`) h = Math.imul(h ^ ch.charCodeAt(0), 0x01000193) >>> 0;
  return h;
}

export type ScheduledKind =
  | 'sigkill'
  | 'sigstop'
  | 'failpoint'
  | 'gateway-5xx'
  | 'gateway-latency'
  | 'gateway-timeout-after-charge'
  | 'gateway-reset-after-charge'
  | 'gateway-decline'
  | 'gateway-ignore-key'
  | 'gateway-unreachable'
  | 'db-connections-dropped'
  | 'pg-restart';

/** One failpoint fault: what is armed on the target instance, on the others, and at the gateway. */
export interface FailpointFault {
  /** Armed on the target instance (core/failpoints.ts syntax). */
  spec: string;
  /** Armed on every other instance for the same window. */
  others?: string;
  /** The gateway's fault set for the window (cleared after). */
  gateway?: Faults;
  /** The window lasts at least this long (a stall must end inside it, a background job must run). */
  minHoldMs?: number;
}

/** The run's lease and purge interval the windows below are sized for (driver.ts LIMITS). */
const LEASE_MS = 1500;
export const PURGE_INTERVAL_MS = 1000;
/** Stalls past the lease: a takeover (a request's or the recoverer's) races the stalled executor. */
const PAST_LEASE = `stall(${LEASE_MS + 500})`;

/**
 * Every failpoint of core/failpoints.ts with an action that makes sense there; a long run draws each
 * many times (schedule.test.ts checks that every name is covered).
 */
export const FAILPOINT_FAULTS: readonly FailpointFault[] = [
  { spec: 'local.before-claim=throw%0.5' },
  { spec: 'local.after-claim=throw%0.5' },
  { spec: 'local.after-claim=drop%0.3' },
  { spec: 'local.after-write=stall(800)%0.5' },
  { spec: 'local.before-commit=sigkill@2' },
  // Committed, the client never hears: its retry must replay the committed answer.
  { spec: 'local.after-commit=sigkill@1' },
  { spec: 'payment.tx1.before-commit=sigstop@1' },
  // PROCESSING under a lease, nothing sent: a takeover asks the gateway (404) and charges.
  { spec: 'payment.tx1.after-commit=sigkill@1' },
  { spec: `payment.charge.before=${PAST_LEASE}@1`, minHoldMs: LEASE_MS + 1000 },
  { spec: 'payment.charge.after=sigkill@1' },
  { spec: 'payment.tx2.before=sigkill@1' },
  { spec: 'payment.tx2.before=throw%0.5' },
  { spec: 'payment.tx2.before=drop@1' },
  // Final in the database, the client never hears: its retry replays.
  { spec: 'payment.tx2.after=sigkill@1' },
  // The target's executors die after Tx 1. On the others a recoverer that takes a payment over
  // stalls for 5 leases (its job with it), so once both have, only the killed requests' own retries
  // can take the payment over (a request's takeover, rarely ahead of a 200 ms recoverer otherwise),
  // and fail there: at once, or frozen in the middle (two executors of one payment, both alive).
  {
    spec: 'payment.tx1.after-commit=sigkill@1',
    others: `recoverer.takeover=stall(${5 * LEASE_MS});payment.takeover=throw@1`,
    minHoldMs: 5 * LEASE_MS,
  },
  {
    spec: 'payment.tx1.after-commit=sigkill@1',
    others: `recoverer.takeover=stall(${5 * LEASE_MS});payment.takeover=sigstop@1`,
    minHoldMs: 5 * LEASE_MS,
  },
  // Payments answered 503 (gateway 5xx) are resumable; their retries resume them and die there.
  {
    spec: 'payment.resume=sigkill@1',
    others: 'payment.resume=throw%0.5',
    gateway: { errorRate: 0.5 },
    minHoldMs: 2000,
  },
  // Refunds' step boundaries (payments/refund-effect.ts): they fire when a client's refund (the
  // driver makes them among its requests) reaches the step while the window is open. A window holds
  // no failpoint after one that kills or freezes the process on the same path (it would never fire).
  { spec: 'refund.tx1.before-commit=sigstop@1' },
  { spec: 'refund.tx1.after-commit=sigkill@1' },
  { spec: 'refund.perform.before=throw@1;refund.tx2.before=drop@1' },
  { spec: 'refund.perform.after=sigkill@1' },
  { spec: 'refund.tx2.before=sigkill@1' },
  { spec: 'refund.tx2.after=sigkill@1' },
  // As for payments: the target's refund dies after Tx 1, the other recoverers stall on a takeover,
  // so the killed refund's own retry takes it over, and fails there.
  {
    spec: 'refund.tx1.after-commit=sigkill@1',
    others: `recoverer.takeover=stall(${5 * LEASE_MS});refund.takeover=throw@1`,
    minHoldMs: 5 * LEASE_MS,
  },
  // Refunds answered 503 (gateway 5xx) are resumable; their retries resume them and die there.
  // Held longer than the payments' window: refunds are fewer (a client's roll, and only of a
  // SUCCEEDED payment), and in 2 s windows no retry of a 503 refund had come back yet.
  {
    spec: 'refund.resume=sigkill@1',
    others: 'refund.resume=throw%0.5',
    gateway: { errorRate: 0.5 },
    minHoldMs: 6000,
  },
  { spec: 'purge.batch=sigkill@1', minHoldMs: PURGE_INTERVAL_MS + 700 },
  { spec: 'purge.batch=drop@1', minHoldMs: PURGE_INTERVAL_MS + 700 },
  // The target's executor stalls past its lease; the recoverer that takes it over (any instance's)
  // dies, or freezes, in the middle of the recovery.
  {
    spec: `payment.tx1.after-commit=${PAST_LEASE}@1;recoverer.takeover=sigkill@1`,
    others: 'recoverer.takeover=sigkill@1',
    minHoldMs: LEASE_MS + 1000,
  },
  {
    spec: `payment.tx1.after-commit=${PAST_LEASE}@1;recoverer.takeover=sigstop@1`,
    others: 'recoverer.takeover=sigstop@1',
    minHoldMs: LEASE_MS + 1000,
  },
];

/**
 * With a gateway that ignores the Idempotency-Key, an executor stalled past its lease charges again
 * after a takeover charged: the gateway really charges twice. The contract's answer is reconcile's
 * refund (npm run reconcile -- --repair), which the driver runs after healing when this was drawn.
 */
export const IGNORE_KEY_FAULT: FailpointFault = {
  spec: `payment.charge.before=${PAST_LEASE}@1`,
  others: `payment.charge.before=${PAST_LEASE}%0.3`,
  gateway: { ignoreIdempotencyKey: true },
  minHoldMs: LEASE_MS + 1500,
};

export interface ScheduledFault {
  /** Pause before this fault (after the previous one ended). */
  gapMs: number;
  kind: ScheduledKind;
  /** The target instance (kills, stops, failpoints). */
  instance?: number;
  /** How long the fault lasts before it is healed (kinds that last). */
  holdMs?: number;
  failpoint?: FailpointFault;
  /** The gateway's fault set for a gateway fault. */
  gateway?: Faults;
}

export interface ScheduleOptions {
  instances: number;
  /** Kinds never drawn (the other draws do not move: a left-out kind is drawn, then dropped). */
  without?: readonly ScheduledKind[];
}

/** Relative weights: failpoints are many, so they are drawn more often. */
const KINDS: ReadonlyArray<[ScheduledKind, number]> = [
  ['sigkill', 1],
  ['sigstop', 1],
  ['failpoint', 3],
  ['gateway-5xx', 1],
  ['gateway-latency', 1],
  ['gateway-timeout-after-charge', 1],
  ['gateway-reset-after-charge', 1],
  ['gateway-decline', 1],
  ['gateway-ignore-key', 1],
  ['gateway-unreachable', 1],
  ['db-connections-dropped', 1],
  // Drawn always, injected only when the run owns its PostgreSQL (driver.ts): the schedule does not
  // depend on where the database is.
  ['pg-restart', 1],
];

/**
 * Which failpoint fault the k-th failpoint window of a seed arms: entry (seed * STRIDE + k) mod the
 * list's length. STRIDE is prime to that length, so any run of as many consecutive seeds as there
 * are entries (`npm run chaos -- --minutes 30` runs 30) starts a seed on every entry: each is armed
 * at least once, whatever the dice say about the rest.
 */
export const FAILPOINT_STRIDE = [7, 11, 13, 17, 19].find((p) => FAILPOINT_FAULTS.length % p !== 0) ?? 1;

/**
 * The faults of one run: drawn until their gaps and holds fill `durationMs`. Every draw is made for
 * every fault whatever its kind (target, hold, latency), so one fault's kind never shifts the draws
 * of the next.
 */
export function drawSchedule(seed: number, durationMs: number, opts: ScheduleOptions): ScheduledFault[] {
  const rnd = random(streamSeed(seed, 'schedule'));
  const without = new Set(opts.without ?? []);
  const total = KINDS.reduce((n, [, w]) => n + w, 0);
  const faults: ScheduledFault[] = [];
  let windows = 0;
  let t = 0;
  for (;;) {
    const gapMs = rnd.int(800, 2500);
    const roll = rnd.next() * total;
    const instance = rnd.int(0, opts.instances - 1);
    const hold = rnd.int(300, 2500);
    const latencyMs = rnd.int(100, 900);
    t += gapMs;
    if (t >= durationMs) break;
    const kind = weighted(roll);
    const fp = FAILPOINT_FAULTS[(seed * FAILPOINT_STRIDE + windows) % FAILPOINT_FAULTS.length];
    if (kind === 'failpoint') windows += 1;
    const fault = scheduled(kind, gapMs, instance, hold, fp, latencyMs);
    t += fault.holdMs ?? 0;
    if (!without.has(kind)) faults.push(fault);
  }
  return faults;
}

/** The kind whose share of the weights contains `roll` (0 <= roll < total weight). */
function weighted(roll: number): ScheduledKind {
  let acc = 0;
  for (const [kind, weight] of KINDS) {
    acc += weight;
    if (roll < acc) return kind;
  }
  return KINDS[KINDS.length - 1][0];
}

function scheduled(
  kind: ScheduledKind,
  gapMs: number,
  instance: number,
  hold: number,
  fp: FailpointFault,
  latencyMs: number,
): ScheduledFault {
  switch (kind) {
    case 'sigkill':
    case 'sigstop':
      return { gapMs, kind, instance, holdMs: hold };
    case 'failpoint':
      return { gapMs, kind, instance, holdMs: Math.max(hold, fp.minHoldMs ?? 0), failpoint: fp };
    case 'gateway-ignore-key':
      return {
        gapMs,
        kind,
        instance,
        holdMs: Math.max(hold, IGNORE_KEY_FAULT.minHoldMs ?? 0),
        failpoint: IGNORE_KEY_FAULT,
      };
    case 'gateway-unreachable':
      return { gapMs, kind, holdMs: hold };
    case 'gateway-5xx':
      return { gapMs, kind, holdMs: hold, gateway: { errorRate: 1 } };
    case 'gateway-latency':
      return { gapMs, kind, holdMs: hold, gateway: { latencyMs } };
    case 'gateway-timeout-after-charge':
      return { gapMs, kind, holdMs: hold, gateway: { timeoutAfterChargeRate: 0.5 } };
    case 'gateway-reset-after-charge':
      return { gapMs, kind, holdMs: hold, gateway: { resetAfterChargeRate: 0.5 } };
    case 'gateway-decline':
      return { gapMs, kind, holdMs: hold, gateway: { declineRate: 0.3 } };
    case 'db-connections-dropped':
    case 'pg-restart':
      return { gapMs, kind };
  }
}

/** One line per fault, as drawn: what `npm run chaos` prints and a failing test names. */
export function describeFault(f: ScheduledFault): string {
  const target = f.instance === undefined ? '' : ` #${f.instance}`;
  return `+${f.gapMs} ms ${f.kind}${target} ${faultSettings(f)}`.trimEnd();
}

/** What a fault sets (failpoints, gateway faults) and for how long. */
export function faultSettings(f: ScheduledFault): string {
  const parts: string[] = [];
  if (f.failpoint) {
    parts.push(f.failpoint.spec);
    if (f.failpoint.others) parts.push(`(others: ${f.failpoint.others})`);
  }
  const gateway = f.gateway ?? f.failpoint?.gateway;
  if (gateway) parts.push(`gateway ${JSON.stringify(gateway)}`);
  if (f.holdMs !== undefined) parts.push(`for ${f.holdMs} ms`);
  return parts.join(' ');
}

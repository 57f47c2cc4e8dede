import { setTimeout as sleep } from 'node:timers/promises';
import { z } from 'zod';
import { ServiceUnavailable } from './errors.js';

/**
 * Named failpoints: compiled in at every boundary of the engine and the payment flow, inert unless
 * the process was started with FAILPOINTS (refused together with NODE_ENV=production) or a test set
 * one through the control route (mounted only when FAILPOINTS_CONTROL=1, never in production).
 *
 *   FAILPOINTS="payment.tx1.before-commit=sigstop@1;payment.charge.before=stall(2000)%0.5"
 *
 * Actions: `sigkill` (the process dies at once: a crash), `sigstop` (the process freezes, as in a GC
 * pause or a VM freeze, until someone sends SIGCONT), `stall(ms)` (this request pauses), `throw` (a
 * transient error at that point), `drop` (every database connection of this process is terminated by
 * the server, the one of the current transaction included, as in a failover or a network cut). `@N` fires on the Nth hit only; `%p` fires with probability p.
 * Disabled, a failpoint costs one Map lookup on an empty map. In a process started with them
 * (FAILPOINTS, or FAILPOINTS_CONTROL=1), each firing first writes `failpoint <name> fired: <action>`
 * to stderr (synchronous on a pipe, so the line is there even when the action kills the process):
 * the chaos driver counts from it which failpoints really fired. Tests that set failpoints in their
 * own process (no such variable) print nothing.
 */
export const FAILPOINT_NAMES = [
  'local.before-claim',
  'local.after-claim',
  'local.after-write',
  'local.before-commit',
  'local.after-commit',
  'payment.tx1.before-commit',
  'payment.tx1.after-commit',
  'payment.charge.before',
  'payment.charge.after',
  'payment.tx2.before',
  'payment.tx2.after',
  'payment.takeover',
  'payment.resume',
  'refund.tx1.before-commit',
  'refund.tx1.after-commit',
  'refund.perform.before',
  'refund.perform.after',
  'refund.tx2.before',
  'refund.tx2.after',
  'refund.takeover',
  'refund.resume',
  'purge.batch',
  'recoverer.takeover',
] as const;
// Not in the chaos driver's schedule (its instances are migrated before it starts): a migration's SQL
// done, its SequelizeMeta row not yet written (test/ops/migrate-crash.test.ts).
export const START_UP_FAILPOINT_NAMES = ['migrate.after-up'] as const;
// Not in the chaos schedule either (its instances run without NATS_URL): the NATS relay published a
// batch and has not moved its position yet (test/events/nats-relay.test.ts).
export const BUS_FAILPOINT_NAMES = ['events.relay.after-publish'] as const;
// Not in the chaos schedule either (its exports, a few hundred rows, are one part each): an export's
// part and checkpoint just committed (test/exports/exports-crash.test.ts kills its worker there).
export const EXPORT_FAILPOINT_NAMES = ['export.part.after'] as const;
const KNOWN: readonly string[] = [
  ...FAILPOINT_NAMES,
  ...START_UP_FAILPOINT_NAMES,
  ...BUS_FAILPOINT_NAMES,
  ...EXPORT_FAILPOINT_NAMES,
];
export type FailpointName =
  | (typeof FAILPOINT_NAMES)[number]
  | (typeof START_UP_FAILPOINT_NAMES)[number]
  | (typeof BUS_FAILPOINT_NAMES)[number]
  | (typeof EXPORT_FAILPOINT_NAMES)[number];

const actionSchema = z.union([
  z.literal('sigkill'),
  z.literal('sigstop'),
  z.literal('throw'),
  z.literal('drop'),
  z.string().regex(/^stall\(\d{1,7}\)$/, 'stall(<ms>)'),
]);

interface Failpoint {
  action: z.infer<typeof actionSchema>;
  /** Fire on this hit only (1-based). */
  nth?: number;
  probability?: number;
  hits: number;
}

const active = new Map<string, Failpoint>();
let dropConnections: (() => Promise<void>) | undefined;

/** How `drop` ends this process's database connections (registered by the composition root). */
export function onDropConnections(drop: () => Promise<void>): void {
  dropConnections = drop;
}

/** The transient error a `throw` failpoint raises: answered 503 with Retry-After, like a real one. */
export class FailpointError extends ServiceUnavailable {
  constructor(name: string) {
    super(`failpoint ${name}: injected transient error`);
  }
}

/** Parses a FAILPOINTS specification; throws with a message naming the bad entry. */
export function parseFailpoints(spec: string): Map<string, Failpoint> {
  const parsed = new Map<string, Failpoint>();
  for (const entry of spec
    .split(';')
    .map((s) => s.trim())
    .filter(Boolean)) {
    const m = /^([a-z0-9.-]+)=([a-z]+(?:\(\d+\))?)(?:@(\d+))?(?:%([01](?:\.\d+)?))?$/.exec(entry);
    if (!m) throw new Error(`FAILPOINTS: cannot read "${entry}" (name=action[@N][%p])`);
    const [, name, action, nth, probability] = m;
    if (!KNOWN.includes(name))
      throw new Error(`FAILPOINTS: unknown failpoint "${name}" (known: ${KNOWN.join(', ')})`);
    const checked = actionSchema.safeParse(action);
    if (!checked.success) throw new Error(`FAILPOINTS: unknown action "${action}" for ${name}`);
    parsed.set(name, {
      action: checked.data,
      nth: nth ? Number(nth) : undefined,
      probability: probability ? Number(probability) : undefined,
      hits: 0,
    });
  }
  return parsed;
}

/** Replaces the active set (start-up from FAILPOINTS, or the test-only control route). */
export function setFailpoints(spec: string): void {
  const parsed = parseFailpoints(spec);
  active.clear();
  for (const [name, fp] of parsed) active.set(name, fp);
}

/**
 * The refusal of CONTRACT-level configuration: failpoints never run in production. Names every
 * variable that enables them (one problem each, joined as config.ts joins its problems).
 */
export function failpointsRefused(env: NodeJS.ProcessEnv): string | undefined {
  if (env.NODE_ENV !== 'production') return undefined;
  const refused: string[] = [];
  if (env.FAILPOINTS) refused.push('FAILPOINTS: never allowed with NODE_ENV=production');
  // FAILPOINTS_CONTROL=0 is the default spelled out: nothing is mounted, nothing to refuse.
  if (env.FAILPOINTS_CONTROL && env.FAILPOINTS_CONTROL !== '0')
    refused.push('FAILPOINTS_CONTROL: never allowed with NODE_ENV=production');
  return refused.length > 0 ? refused.join('; ') : undefined;
}

/** Whether any of these failpoints is active (a flow may then take the path that has them). */
export function anyArmed(names: readonly FailpointName[]): boolean {
  return active.size > 0 && names.some((name) => active.has(name));
}

/** A named point of the flow: does nothing unless a failpoint of this name is active. */
export async function failpoint(name: FailpointName): Promise<void> {
  if (active.size === 0) return;
  const fp = active.get(name);
  if (!fp) return;
  fp.hits += 1;
  if (fp.nth !== undefined && fp.hits !== fp.nth) return;
  if (fp.probability !== undefined && Math.random() >= fp.probability) return;
  if (process.env.FAILPOINTS || process.env.FAILPOINTS_CONTROL === '1')
    process.stderr.write(`failpoint ${name} fired: ${fp.action}\n`);
  if (fp.action === 'sigkill') process.kill(process.pid, 'SIGKILL');
  else if (fp.action === 'sigstop') process.kill(process.pid, 'SIGSTOP');
  else if (fp.action === 'throw') throw new FailpointError(name);
  else if (fp.action === 'drop') await dropConnections?.();
  else await sleep(Number(/\d+/.exec(fp.action)?.[0] ?? 0));
}

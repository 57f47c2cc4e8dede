// A background effect: work that outlives its request (an export), the task-id pattern of the seed.
// It is the effect mechanism's other face (DESIGN "Effects: Mode B as a capability"): the request's
// Tx 1 writes the resource row with its idempotency record and answers 202 with the row's id; the
// work then runs on any instance under the row's lease (row-lease.ts: the lease protocol of lease.ts
// on a resource row), part by part, each part committed with its checkpoint in one transaction fenced
// on the owner token, so a worker that was taken over writes nothing more and its successor continues
// from the last committed part. It has no downstream to query: its own parts are its downstream, and
// the checkpoint is what "query first" reads. A definition says only what is its own (its row, its
// next part, its refusal, its final figures); taking the lease, the fenced parts and finish, the stop,
// the failpoints and the recoverer's sweep for dead workers' rows are written here once.
import type { Sequelize, Transaction } from 'sequelize';
import { type FailpointName, failpoint } from '../core/failpoints.js';
import { pauseAfterBatch, timerWait, type Wait } from '../core/pacing.js';
import { sqlRows } from '../core/sql.js';
import { fencedUpdate, type RowLease, releaseRowLease, takeRowLease } from './row-lease.js';

export interface BackgroundDeps {
  sequelize: Sequelize;
  /** The worker's lease: renewed with every part it writes. */
  leaseMs: number;
  /**
   * The share of wall time, in percent, a worker spends on its parts (EXPORT_BUSY_PERCENT): after a
   * part that took `t` ms it pauses `t × (100 − busyPercent) / busyPercent` ms, so that on a small
   * machine a long export does not take a core from the requests. Absent or 100: back to back.
   */
  busyPercent?: number;
  /** How a pause is waited (a timer; tests pass their own). Resolves early when the run is stopped. */
  wait?: Wait;
}

/**
 * The resource row of a background effect, as its worker reads it under the lease. Its table has
 * `id`, `status` ('PROCESSING' until finished), `lease_owner`, `lease_until`, `updated_at`,
 * `parts_written` (the checkpoint's part number), `failure_reason` and `completed_at`.
 */
export interface BackgroundRow {
  partsWritten: number;
}

/** One part of the work: written with its checkpoint in one fenced transaction. */
export interface Part<Row> {
  /** The checkpoint's own assignments (SQL, `$1`.. for `values`), beside parts_written + 1. */
  checkpoint: string;
  values: unknown[];
  /** The part's own writes, in the checkpoint's transaction, once the fenced update matched. */
  save(t: Transaction, partNo: number): Promise<unknown>;
  /** The row as it stands after this part (its next part starts from here). */
  after: Row;
  /** True when nothing is left after this part. */
  last: boolean;
}

export type BackgroundStep = 'part.after';

export interface BackgroundEffect<D extends BackgroundDeps, Row extends BackgroundRow> {
  /** Its job queue: one job per row (jobKey = the row's id). */
  name: string;
  table: string;
  failpoints: Partial<Record<BackgroundStep, FailpointName>>;
  /** The row this lease holds, its checkpoint included; undefined when fenced off meanwhile. */
  read(deps: D, lease: RowLease): Promise<Row | undefined>;
  /** Before the first part: why the work cannot be done (it finishes FAILED with that reason). */
  refusal?(deps: D, row: Row): Promise<string | undefined>;
  /** The next part after the row's checkpoint; undefined when nothing is left. */
  nextPart(deps: D, row: Row): Promise<Part<Row> | undefined>;
  /** SUCCEEDED's own assignments (SQL, `$1`.. for `values`) beside status and completed_at. */
  succeeded(deps: D): { set: string; values: unknown[] };
}

// biome-ignore lint/suspicious/noExplicitAny: a registry holds background effects of every row type
export type AnyBackgroundEffect = BackgroundEffect<any, any>;

const registered = new Map<string, AnyBackgroundEffect>();

/** Declares a background effect and registers it (the recoverer's sweep and the job runner find it). */
export function defineBackgroundEffect<D extends BackgroundDeps, Row extends BackgroundRow>(
  effect: BackgroundEffect<D, Row>,
): BackgroundEffect<D, Row> {
  if (!/^[a-z_][a-z0-9_]*$/.test(effect.table)) throw new Error(`not a table name: ${effect.table}`);
  registered.set(effect.name, effect);
  return effect;
}

/** Every background effect defined in this process. */
export const registeredBackgroundEffects = (): AnyBackgroundEffect[] => [...registered.values()];

/** How a run ended: finished (either way), someone else holds it, fenced off meanwhile, or stopped. */
export type BackgroundResult = 'succeeded' | 'failed' | 'busy' | 'fenced' | 'stopped';

/**
 * Writes one part and the checkpoint after it in one transaction whose first statement is the
 * checkpoint's UPDATE fenced on the owner token: the part is saved only when it matched. The part
 * number it moved to must follow the one this worker read: a second guard beside the owner.
 */
async function writePart<D extends BackgroundDeps, Row extends BackgroundRow>(
  deps: D,
  lease: RowLease,
  row: Row,
  part: Part<Row>,
): Promise<boolean> {
  return deps.sequelize.transaction(async (t) => {
    const moved = await fencedUpdate<{ partNo: number }>(
      deps.sequelize,
      lease,
      `parts_written = parts_written + 1${part.checkpoint ? `, ${part.checkpoint}` : ''}`,
      part.values,
      `parts_written AS "partNo"`,
      t,
    );
    if (!moved) return false;
    if (moved.partNo !== row.partsWritten + 1)
      throw new Error(`${lease.table} ${lease.id}: checkpoint moved under its owner`);
    await part.save(t, moved.partNo);
    return true;
  });
}

/** The final state, fenced like a part: SUCCEEDED with the effect's figures, or FAILED with why. */
async function finish<D extends BackgroundDeps>(
  effect: BackgroundEffect<D, BackgroundRow>,
  deps: D,
  lease: RowLease,
  failure?: string,
): Promise<boolean> {
  const end = 'completed_at = now(), lease_owner = NULL';
  if (failure !== undefined) {
    const failed = await fencedUpdate(
      deps.sequelize,
      lease,
      `status = 'FAILED', failure_reason = $1, ${end}`,
      [failure],
    );
    return failed !== undefined;
  }
  const { set: figures, values } = effect.succeeded(deps);
  const set = `status = 'SUCCEEDED', ${figures}, ${end}`;
  return (await fencedUpdate(deps.sequelize, lease, set, values)) !== undefined;
}

/**
 * Runs (or continues) one row's work: takes its lease, asks for a refusal before the first part, then
 * writes part after part from the checkpoint until none is left, and finishes. Memory holds one part.
 * Safe on any number of workers at once: one holds the lease, the others return 'busy'.
 */
export async function runBackground<D extends BackgroundDeps, Row extends BackgroundRow>(
  effect: BackgroundEffect<D, Row>,
  deps: D,
  id: string,
  signal?: AbortSignal,
): Promise<BackgroundResult> {
  const lease = await takeRowLease(deps.sequelize, effect.table, id, deps.leaseMs);
  if (!lease) return 'busy';
  let row = await effect.read(deps, lease);
  if (!row) return 'fenced';
  if (row.partsWritten === 0) {
    const refused = await effect.refusal?.(deps, row);
    if (refused) return (await finish(effect, deps, lease, refused)) ? 'failed' : 'fenced';
  }
  const { busyPercent = 100, wait = timerWait } = deps;
  for (;;) {
    if (signal?.aborted) {
      // A graceful stop: the lease is given up at once, so another instance continues without waiting.
      await releaseRowLease(deps.sequelize, lease);
      return 'stopped';
    }
    const started = performance.now();
    const part = await effect.nextPart(deps, row);
    if (!part) break;
    if (!(await writePart(deps, lease, row, part))) return 'fenced';
    row = part.after;
    const step = effect.failpoints['part.after'];
    if (step) await failpoint(step);
    if (part.last) break;
    // Paced (busyPercent). The lease was renewed with this part; a pause never takes more than a
    // quarter of it, so the worker always writes its next part well before a takeover could start.
    const pause = Math.min(pauseAfterBatch(performance.now() - started, busyPercent), deps.leaseMs / 4);
    if (pause > 0) await wait(pause, signal);
  }
  return (await finish(effect, deps, lease)) ? 'succeeded' : 'fenced';
}

/**
 * The recoverer's sweep of a background effect: its PROCESSING rows whose lease is free (never taken:
 * the job added after the request's commit was lost to a crash; or expired: its worker died), for the
 * caller to run again. The run's own lease decides who works on each.
 */
export async function freeRows(
  effect: AnyBackgroundEffect,
  sequelize: Sequelize,
  batch = 100,
): Promise<string[]> {
  const rows = await sqlRows<{ id: string }>(
    sequelize,
    `SELECT id::text AS id FROM ${effect.table}
      WHERE status = 'PROCESSING' AND (lease_until IS NULL OR lease_until < now()) ORDER BY id LIMIT $1`,
    [batch],
  );
  return rows.map((r) => r.id);
}

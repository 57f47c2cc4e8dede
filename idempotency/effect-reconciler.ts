// The definition of an effect's reconciliation (effect-reconcile.ts runs it, effect-repair.ts repairs
// with it): what a definition says of itself, and the mismatches and outcomes every report shares.
import { Op } from 'sequelize';
import type { Effect, EffectDeps, EffectRow } from './effect.js';

/** reported: left as found; repaired: fixed now; in-flight: a live executor owns it (transient);
 * failed: a repair was attempted and did not complete (the next run tries again); waiting: a
 * resumable row younger than the operator's limit, waiting for its client (not a fault yet). */
export type RepairOutcome = 'reported' | 'repaired' | 'in-flight' | 'failed' | 'waiting';

export interface RepairResult {
  outcome: RepairOutcome;
  note: string;
}

export const REPORTED: RepairResult = { outcome: 'reported', note: 'never repaired automatically' };

/** What a row contradicts downstream; a definition names each kind in its report. */
export type Mismatch =
  /** PROCESSING locally, done downstream: finished as the service would have (repair). */
  | 'processing-but-done'
  /** SUCCEEDED locally, nothing stands downstream: reported, never touched. */
  | 'succeeded-but-not-done'
  /** FAILED locally, done downstream. */
  | 'failed-but-done'
  /** The key done more than once (seen only in a listing): the extras compensated, or reported. */
  | 'done-more-than-once'
  /** Done downstream for another amount (or currency): reported, never finalised. */
  | 'amount-mismatch'
  /** A key in the listing that no row has (only in a run over every merchant). */
  | 'done-without-row'
  /** PROCESSING and certainly not done yet, waiting for its client; unresolved beyond the age limit. */
  | 'resumable'
  /** No listing, and the query by key could not be answered. */
  | 'unverifiable';

/** Which rows a run checks: one merchant's (all without one), created at or after `since`. */
export interface Scope {
  merchantId?: string;
  since?: Date;
}

/** The find options of the rows in scope (their model's `merchantId` and `createdAt`), oldest first. */
export const inScope = ({ merchantId, since }: Scope) => ({
  where: { ...(merchantId ? { merchantId } : {}), ...(since ? { createdAt: { [Op.gte]: since } } : {}) },
  order: [['createdAt', 'ASC']] as [string, string][],
});

export interface ReconcileOptions extends Scope {
  repair: boolean;
  /**
   * A resumable row (its last attempt certainly did nothing downstream, waiting for its client to ask
   * again) older than this many seconds counts as unresolved. Default 3600.
   */
  resumableMaxAgeSeconds?: number;
}

/** An entry of the downstream (a charge, a refund): SUCCEEDED when it was done. */
export interface Found {
  status?: string;
}

/** What the downstream lists; `undone`: entries a compensation undid (they no longer stand). */
export interface Listing<F> {
  entries: F[];
  undone?: (found: F) => boolean;
}

/** The words of an effect's report ("payment", "charge", "paymentNo", "charged", "gateway") and its phrases. */
export interface Words {
  row: string;
  noun: string;
  key: string;
  done: string;
  by: string;
  /** Who performs a resumable row: "the next POST /payments for its order executes it". */
  resume: string;
  /** Why a SUCCEEDED row is wrong when nothing stands downstream. */
  notDone(found: unknown[]): string;
  /** What a FAILED row contradicts: "a charge stands". */
  stands: string;
}

/** An undo of one extra entry (`verb`: "refund"); `keeps`: the entry the row records. */
export interface Compensation<D, Row, F> {
  verb: string;
  keeps(row: Row, found: F): boolean;
  undo(deps: D, row: Row, found: F): Promise<unknown>;
}

/** A mismatch as the mechanism sees it; the definition's `entry` gives it the report's shape. */
export interface Listed<Row extends EffectRow, F> extends RepairResult {
  kind: Mismatch;
  key: string;
  row: Row | null;
  /** The row's status when the run looked at it. */
  localStatus: Row['status'] | null;
  found: F[];
  detail: string;
}

export interface Reconciler<D extends EffectDeps, Row extends EffectRow, F extends Found, Out> {
  effect: Effect<D, never, Row, F>;
  words: Words;
  /** The column of the downstream key in the effect's table (a plain identifier). */
  keyColumn: string;
  key(row: Row): string;
  keyOf(found: F): string;
  /** The rows in scope, oldest first. */
  list(scope: Scope): Promise<Row[]>;
  /** Every entry the downstream knows of; undefined when it offers no listing. */
  listing(deps: D): Promise<Listing<F> | undefined>;
  /** The entry was made for another amount (or currency) than the row's. */
  differs(row: Row, found: F): boolean;
  mismatch(row: Row, wrong: F[]): string;
  /** The downstream's id of an entry (a chargeId). */
  id(found: F): string;
  /**
   * How the row is finalised when no record can finish it (effect-repair.ts finaliseAlone): the
   * column of the downstream's id, and what else changes when it was done (`also`, a statement on
   * the row's RETURNING columns as `r`).
   */
  alone: { column: string; returning: string; also: string };
  /** A key done more than once: how the extras are undone, or (reported only) why they cannot be. */
  duplicates: Compensation<D, Row, F> | { note: string };
  entry(listed: Listed<Row, F>): Out | Promise<Out>;
}

/** Declares an effect's reconciliation (its columns are written into statements: checked here). */
export function defineReconciler<D extends EffectDeps, Row extends EffectRow, F extends Found, Out>(
  rec: Reconciler<D, Row, F, Out>,
): Reconciler<D, Row, F, Out> {
  for (const column of [rec.keyColumn, rec.alone.column])
    if (!/^[a-z_][a-z0-9_]*$/.test(column)) throw new Error(`not a column name: ${column}`);
  return rec;
}

export interface Reconciliation<Out> {
  source: 'ledger' | 'query';
  /** Rows checked, and the downstream's entries found for them. */
  rows: number;
  found: number;
  entries: Out[];
  /** Entries still wrong after this run (reported or failed); in-flight ones are transient. */
  unresolved: number;
}

/** The exit code for a report: 1 while any mismatch stays unrepaired (in-flight ones are transient). */
export const exitCodeFor = (report: { unresolved: number }): 0 | 1 => (report.unresolved === 0 ? 0 : 1);

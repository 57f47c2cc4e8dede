// Reconciliation of an effect's rows with what its downstream reports (spec rule 4.4.11: a downstream
// without idempotency needs query, reconciliation and compensation), written once for every effect:
// the listing of the rows against the downstream's entries by downstream key, the checks, the repairs
// (effect-repair.ts) and the report's entries. A definition (`Reconciler`) says only what is its own:
// how to list its rows and read the downstream's listing, how amounts compare, how a row is finalised
// when no record can finish it, how a key done twice is compensated, and the words of its report.
//
// A key done twice is seen only in a listing of every entry (a ledger, a settlement report): a
// downstream's query by key returns one entry. Without a listing each row is queried instead (the
// effect's own `query`), and a row whose query cannot be answered is unverifiable.
import { Op, QueryTypes } from 'sequelize';
import type { Effect, EffectDeps, EffectRow } from './effect.js';
import { finish, REPORTED, type RepairResult, type Run, undoExtras } from './effect-repair.js';

export type { RepairOutcome, RepairResult } from './effect-repair.js';

export type Mismatch =
  | 'processing-but-done'
  | 'succeeded-but-not-done'
  | 'failed-but-done'
  | 'done-more-than-once'
  | 'amount-mismatch'
  | 'done-without-row'
  | 'resumable'
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

export async function reconcileEffect<D extends EffectDeps, Row extends EffectRow, F extends Found, Out>(
  rec: Reconciler<D, Row, F, Out>,
  deps: D,
  opts: ReconcileOptions,
): Promise<Reconciliation<Out>> {
  // Rows before the downstream: a row is finalised only after the downstream did it, so a row read as
  // SUCCEEDED has its entry in the listing taken afterwards (no false "succeeded but not done");
  // entries of rows created meanwhile are looked up again below (no false "without row").
  const rows = await rec.list(opts);
  const listing = await rec.listing(deps);
  const found = listing ? byKey(rec, listing.entries) : await queried(rec, deps, rows);
  const run: Run<D, Row, F, Out> = { rec, deps, repair: opts.repair };
  const listed: Listed<Row, F>[] = [];
  for (const row of rows) {
    // With a listing, a key it does not list was never done; without one, absent: query unavailable.
    const mine = listing ? (found.get(rec.key(row)) ?? []) : found.get(rec.key(row));
    if (mine) listed.push(...(await check(run, opts, listing?.undone ?? (() => false), row, mine)));
    else
      listed.push(
        mismatch(rec, row, row.status, 'unverifiable', [], `the ${rec.words.by} query was unavailable`, {
          outcome: 'reported',
          note: 'checked again by the next run',
        }),
      );
  }
  if (listing && !opts.merchantId) listed.push(...(await withoutRow(rec, deps, found, rows)));
  const entries: Out[] = [];
  for (const l of listed) entries.push(await rec.entry(l));
  return {
    source: listing ? 'ledger' : 'query',
    rows: rows.length,
    found: rows.reduce((n, row) => n + (found.get(rec.key(row))?.length ?? 0), 0),
    entries,
    unresolved: listed.filter((l) => l.outcome === 'reported' || l.outcome === 'failed').length,
  };
}

function mismatch<Row extends EffectRow, F>(
  rec: { key(row: Row): string },
  row: Row,
  localStatus: Row['status'],
  kind: Mismatch,
  found: F[],
  detail: string,
  result: RepairResult,
): Listed<Row, F> {
  return { kind, key: rec.key(row), row, localStatus, found, detail, ...result };
}

function byKey<F extends Found>(rec: { keyOf(found: F): string }, entries: F[]): Map<string, F[]> {
  const map = new Map<string, F[]>();
  for (const f of entries) {
    const key = rec.keyOf(f);
    const same = map.get(key);
    if (same) same.push(f);
    else map.set(key, [f]);
  }
  return map;
}

/** Without a listing: each row's one entry, by the effect's own query (absent: it could not answer). */
async function queried<D extends EffectDeps, Row extends EffectRow, F extends Found, Out>(
  rec: Reconciler<D, Row, F, Out>,
  deps: D,
  rows: Row[],
): Promise<Map<string, F[]>> {
  const found = new Map<string, F[]>();
  for (let i = 0; i < rows.length; i += 10) {
    await Promise.all(
      rows.slice(i, i + 10).map(async (row) => {
        const q = await rec.effect.query(deps, row);
        if (q.kind !== 'unknown') found.set(rec.key(row), q.kind === 'done' ? [q.result] : []);
      }),
    );
  }
  return found;
}

/** A row against its key's entries downstream (`undone`: entries a compensation undid). */
async function check<D extends EffectDeps, Row extends EffectRow, F extends Found, Out>(
  run: Run<D, Row, F, Out>,
  opts: ReconcileOptions,
  undone: (found: F) => boolean,
  row: Row,
  found: F[],
): Promise<Listed<Row, F>[]> {
  const { rec } = run;
  const { words } = rec;
  const out: Listed<Row, F>[] = [];
  // The status as the run found it: a finalisation below changes the row.
  const status = row.status;
  const add = (kind: Mismatch, which: F[], detail: string, result: RepairResult) =>
    out.push(mismatch(rec, row, status, kind, which, detail, result));
  const standing = found.filter((f) => f.status === 'SUCCEEDED' && !undone(f));
  const wrong = found.filter((f) => !undone(f) && rec.differs(row, f));
  if (status === 'PROCESSING' && row.resumableSince && standing.length === 0) {
    // Listed, never performed here: its client was told nothing was done (CONTRACT section 3).
    const age = Math.floor((Date.now() - row.resumableSince.getTime()) / 1000);
    const limit = opts.resumableMaxAgeSeconds ?? 3600;
    add('resumable', [], `resumable for ${age} s: ${words.resume}`, {
      outcome: age > limit ? 'reported' : 'waiting',
      note: age > limit ? `older than ${limit} s: its client has not come back` : '',
    });
  }
  if (wrong.length > 0) add('amount-mismatch', wrong, rec.mismatch(row, wrong), REPORTED);
  if (status === 'PROCESSING' && found.length > 0) {
    // What the service itself would settle on: the entry its query returns (the first one).
    const first = found[0];
    const result: RepairResult =
      wrong.length > 0
        ? { outcome: 'reported', note: `not finalised: the ${words.done} amount differs` }
        : await finish(run, row, first);
    add('processing-but-done', [first], `${words.by} ${words.noun} ${first.status}`, result);
  }
  if (status === 'SUCCEEDED' && standing.length === 0)
    add('succeeded-but-not-done', found, `SUCCEEDED locally but ${words.notDone(found)}`, REPORTED);
  if (status === 'FAILED' && standing.length > 0)
    add('failed-but-done', standing, `FAILED locally but ${words.stands}`, REPORTED);
  // After any finalisation above, so that the entry just recorded is the one kept.
  if (standing.length > 1) {
    const [extras, result] = await undoExtras(run, row, standing);
    add('done-more-than-once', extras, `${found.length} ${words.noun}s for one ${words.key}`, result);
  }
  return out;
}

/** Listed entries whose key no row has (looked up beyond the scope, in the whole table). */
async function withoutRow<D extends EffectDeps, Row extends EffectRow, F extends Found, Out>(
  rec: Reconciler<D, Row, F, Out>,
  deps: D,
  found: Map<string, F[]>,
  rows: Row[],
): Promise<Listed<Row, F>[]> {
  const listed = new Set(rows.map((row) => rec.key(row)));
  const others = [...found.keys()].filter((key) => !listed.has(key));
  const known = new Set<string>();
  if (others.length > 0) {
    const col = rec.keyColumn;
    const rowsWithKey = await deps.sequelize.query<{ key: string }>(
      `SELECT ${col} AS key FROM ${rec.effect.table} WHERE ${col} = ANY($1)`,
      { bind: [others], type: QueryTypes.SELECT },
    );
    for (const r of rowsWithKey) known.add(r.key);
  }
  return others
    .filter((key) => !known.has(key))
    .map((key) => {
      const mine = found.get(key) ?? [];
      const detail = `${mine.length} ${rec.words.noun}(s) for a ${rec.words.key} unknown locally`;
      return {
        kind: 'done-without-row',
        key,
        row: null,
        localStatus: null,
        found: mine,
        detail,
        ...REPORTED,
      };
    });
}

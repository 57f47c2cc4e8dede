// Reconciliation of an effect's rows with what its downstream reports (spec rule 4.4.11: a downstream
// without idempotency needs query, reconciliation and compensation), written once for every effect:
// the listing of the rows against the downstream's entries by downstream key, the checks, the repairs
// (effect-repair.ts) and the report's entries. A definition (`Reconciler`, effect-reconciler.ts) says only what is its own:
// how to list its rows and read the downstream's listing, how amounts compare, how a row is finalised
// when no record can finish it, how a key done twice is compensated, and the words of its report.
//
// A key done twice is seen only in a listing of every entry (a ledger, a settlement report): a
// downstream's query by key returns one entry. Without a listing each row is queried instead (the
// effect's own `query`), and a row whose query cannot be answered is unverifiable.
import { QueryTypes } from 'sequelize';
import type { EffectDeps, EffectRow } from './effect.js';
import {
  type Found,
  type Listed,
  type Mismatch,
  REPORTED,
  type ReconcileOptions,
  type Reconciler,
  type Reconciliation,
  type RepairResult,
} from './effect-reconciler.js';
import { finish, type Run, undoExtras } from './effect-repair.js';

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
    // With a listing, a key it does not list has not been done; without one, absent: query unavailable.
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

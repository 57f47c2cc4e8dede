// Reconcile's repairs (effect-reconcile.ts), for every effect. Every write goes through the service's
// own guards: a row with an open idempotency record is finished only after a takeover of an ended
// lease, query first (effect-recover.ts settleByQuery), so a live executor is never overwritten; the
// downstream is only ever queried, never performed; an entry is undone only by the definition's
// idempotent compensation, never under a live lease.
import { QueryTypes } from 'sequelize';
import type { EffectDeps, EffectRow } from './effect.js';
import type { Found, Reconciler, RepairResult, Words } from './effect-reconciler.js';
import { openRecords, settleByQuery } from './effect-recover.js';

const LIVE: RepairResult = {
  outcome: 'in-flight',
  note: 'in-flight, skipped: an executor holds a live lease',
};

/** One run of one effect: its definition, the deps its steps use, whether to repair. */
export interface Run<D extends EffectDeps, Row extends EffectRow, F extends Found, Out> {
  rec: Reconciler<D, Row, F, Out>;
  deps: D;
  repair: boolean;
}

/** True while an executor holds a live lease on the row: reconcile then leaves it alone. */
const underLiveLease = async (deps: EffectDeps, id: string) =>
  (await openRecords(deps, id)).some((r) => r.live);

/** Why a query settled nothing. */
const unsettled = ({ words }: { words: Words }, kind: 'unknown' | 'not_done'): RepairResult => ({
  outcome: 'failed',
  note: `not finalised: ${kind === 'unknown' ? `the ${words.by} query was unavailable` : `the query found no ${words.noun}`}`,
});

/**
 * PROCESSING locally, done downstream (`first`: what the service's own query returns): finish it as
 * the service would have. Through its open records (take over: one winner; query; finalise under the
 * lease), or, when none is open any more (so no executor can write it either), query and the
 * definition's one conditional statement.
 */
export async function finish<D extends EffectDeps, Row extends EffectRow, F extends Found, Out>(
  { rec, deps, repair }: Run<D, Row, F, Out>,
  row: Row,
  first: F,
): Promise<RepairResult> {
  const records = await openRecords(deps, row.id);
  // Checked in report-only runs too: a row being performed right now is not a mismatch.
  if (records.some((r) => r.live)) return LIVE;
  if (records.length === 0) {
    // Its executor may have finished between the listing and now.
    const now = await rec.effect.read(row.id);
    if (now?.status !== 'PROCESSING')
      return { outcome: 'in-flight', note: `settled meanwhile as ${now?.status}` };
  }
  if (!repair) return { outcome: 'reported', note: `repairable: finalise as ${first.status}` };
  if (records.length > 0) {
    const settled = await settleByQuery(rec.effect, deps, row, records);
    if (settled === 'finalised')
      return { outcome: 'repaired', note: `finalised as ${row.status} through a lease takeover` };
    if (settled === 'taken')
      return { outcome: 'in-flight', note: 'in-flight, skipped: another executor took it over' };
    return settled === 'fenced' ? LIVE : unsettled(rec, settled);
  }
  const asked = await rec.effect.query(deps, row);
  if (asked.kind !== 'done') return unsettled(rec, asked.kind);
  const changed = await finaliseAlone(rec, deps, row, asked.result);
  const now = await rec.effect.read(row.id);
  return changed
    ? { outcome: 'repaired', note: `finalised as ${now?.status} (no open idempotency record)` }
    : { outcome: 'in-flight', note: `skipped: the ${rec.words.row} became ${now?.status} meanwhile` };
}

/**
 * A key done more than once downstream (`standing`: its entries that stand). With a compensation, the
 * entry kept is the one the row records now (after any finalisation above), else the first that
 * stands, never one undone already (which would leave a SUCCEEDED row with nothing done); every other
 * is an extra, undone (idempotent, so a retry is safe; a second run finds them undone). Without one,
 * all are reported. Returns the entries concerned and what became of them.
 */
export async function undoExtras<D extends EffectDeps, Row extends EffectRow, F extends Found, Out>(
  { rec, deps, repair }: Run<D, Row, F, Out>,
  row: Row,
  standing: F[],
): Promise<[F[], RepairResult]> {
  const how = rec.duplicates;
  if ('note' in how) return [standing, { outcome: 'reported', note: how.note }];
  const now = (await rec.effect.read(row.id)) ?? row;
  const keep = standing.find((f) => how.keeps(now, f)) ?? standing[0];
  const extras = standing.filter((f) => f !== keep);
  // Never under a live lease: its executor may be about to record an entry this run would call extra.
  if (await underLiveLease(deps, row.id)) return [extras, LIVE];
  const ids = extras.map(rec.id).join(', ');
  if (!repair) return [extras, { outcome: 'reported', note: `repairable: ${how.verb} ${ids}` }];
  const failed: string[] = [];
  for (const extra of extras) {
    // An undo whose answer was lost may have happened: the next run sees it in the listing or retries.
    await how.undo(deps, now, extra).catch(() => failed.push(rec.id(extra)));
  }
  return [
    extras,
    failed.length === 0
      ? { outcome: 'repaired', note: `${how.verb}ed ${ids}` }
      : { outcome: 'failed', note: `${how.verb} failed for ${failed.join(', ')}` },
  ];
}

/**
 * No record can finish the row any more (none is open), so no executor can write it either: one
 * statement finalises it as `found` says, only while it is PROCESSING, with the definition's `also`
 * when it was done. True when it did.
 */
async function finaliseAlone<D extends EffectDeps, Row extends EffectRow, F extends Found, Out>(
  rec: Reconciler<D, Row, F, Out>,
  deps: D,
  row: Row,
  found: F,
): Promise<boolean> {
  const { column, returning, also } = rec.alone;
  const done = found.status === 'SUCCEEDED';
  const [changed] = await deps.sequelize.query<{ n: string }>(
    `WITH r AS (UPDATE ${rec.effect.table} SET status = $2, failure_reason = $3, ${column} = $4,
                       resumable_since = NULL, updated_at = now()
                WHERE id = $1 AND status = 'PROCESSING' RETURNING ${returning})
          ${done ? `, t AS (${also} RETURNING 1)` : ''}
     SELECT count(*) AS n FROM r`,
    {
      bind: [row.id, done ? 'SUCCEEDED' : 'FAILED', done ? null : 'DECLINED', rec.id(found)],
      type: QueryTypes.SELECT,
    },
  );
  return Number(changed?.n) === 1;
}

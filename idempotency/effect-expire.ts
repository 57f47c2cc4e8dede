import { QueryTypes } from 'sequelize';
import type { AnyEffect, EffectDeps, EffectRow } from './effect.js';

/** What became of a resource the closure looked at. */
export type Closure =
  /** Closed: FAILED with the effect's failureReason. */
  | 'closed'
  /** Done downstream after all: left PROCESSING for reconcile's repair (see below). */
  | 'done'
  /** The downstream could not answer: asked again next round. */
  | 'unknown'
  /** Resumed or finished by someone else between our query and our statement: theirs now. */
  | 'moved';

export interface ClosureHooks {
  /** Each resource looked at, with what became of it. */
  onResult?: (id: string, result: Closure) => void;
  /** A resource that failed (its row gone, the database busy): the next round tries it again. */
  onError?: (id: string, err: unknown) => void;
}

/**
 * Resources found done downstream, by effect: left to reconcile's repair and not asked about again by
 * this process (else one such resource would be asked about every round, and a batch of them would
 * keep the rest waiting).
 */
const leftToReconcile = new Map<string, Set<string>>();

/**
 * Closes the resumable resources of an effect that only their own Idempotency-Key can resume, once
 * that key has expired (effect.ts `closedOnKeyExpiry`; refunds). Such a resource's last attempt
 * certainly did nothing downstream (it was answered 503), and the recoverer never performs it on its
 * own (CONTRACT sections 3 and 10); once its key is refused (40905) nothing could ever finish it.
 *
 * A resource counts as expired `keyTtlMs` after it was created: its idempotency record was written in
 * the same transaction, with the key's TTL (the caller adds a lease, for two hosts' clocks). Then,
 * query first:
 * - certainly not done → one conditional statement closes it if it is still resumable. A resume takes
 *   that same mark first (effect-resume.ts takeResume), so no attempt can have started between our
 *   query and our statement: either ours wins (FAILED; a late retry with the key replays that) or the
 *   resume does and owns the outcome ('moved');
 * - done downstream (a downstream that refused or failed the call and did it anyway) → left PROCESSING:
 *   `npm run reconcile -- --repair` finalises it as the downstream says, with the money it moved;
 * - downstream unavailable → the next round asks again.
 * Returns how many it closed.
 */
export async function closeExpiredResumables(
  effect: AnyEffect,
  deps: EffectDeps,
  keyTtlMs: number,
  batch = 20,
  hooks: ClosureHooks = {},
): Promise<number> {
  const expiry = effect.closedOnKeyExpiry;
  if (!expiry) return 0;
  const skipped = leftToReconcile.get(effect.name) ?? new Set<string>();
  leftToReconcile.set(effect.name, skipped);
  // From the table's partial index on resumable_since: resumable resources are few.
  const rows = await deps.sequelize.query<{ id: string }>(
    `SELECT id FROM ${effect.table}
     WHERE resumable_since IS NOT NULL AND status = 'PROCESSING'
       AND created_at < now() - make_interval(secs => $1::float8) AND NOT (id = ANY($2::text[]))
     ORDER BY resumable_since LIMIT $3`,
    { bind: [keyTtlMs / 1000, [...skipped], batch], type: QueryTypes.SELECT },
  );
  let closed = 0;
  for (const { id } of rows) {
    try {
      const result = await closeOne(effect, deps, id, expiry.failureReason);
      if (result === 'closed') closed += 1;
      if (result === 'done') skipped.add(id);
      hooks.onResult?.(id, result);
    } catch (err) {
      hooks.onError?.(id, err);
    }
  }
  return closed;
}

async function closeOne(effect: AnyEffect, deps: EffectDeps, id: string, reason: string): Promise<Closure> {
  const row: EffectRow | undefined = await effect.read(id);
  if (row?.status !== 'PROCESSING' || !row.resumableSince) return 'moved';
  const found = await effect.query(deps, row);
  if (found.kind === 'done') return 'done';
  if (found.kind === 'unknown') return 'unknown';
  const [, count] = await deps.sequelize.query(
    `UPDATE ${effect.table} SET status = 'FAILED', failure_reason = $2, resumable_since = NULL, updated_at = now()
     WHERE id = $1 AND status = 'PROCESSING' AND resumable_since IS NOT NULL`,
    { bind: [id, reason], type: QueryTypes.UPDATE },
  );
  return count === 1 ? 'closed' : 'moved';
}

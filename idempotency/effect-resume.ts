import { QueryTypes, type Transaction } from 'sequelize';
import { inTransaction } from '../core/database.js';
import type { AnyEffect, EffectDeps } from './effect.js';
import type { Lease } from './lease.js';
import type { Reply } from './outcome.js';

/**
 * Takes the resource's resumable mark, inside the caller's transaction: a conditional update, so of
 * any number of resumers (the same key retried, new keys, on any instance) exactly one wins and
 * executes the effect again. false: not resumable (in flight elsewhere, or final).
 */
export async function takeResume(
  deps: EffectDeps,
  effect: AnyEffect,
  t: Transaction,
  id: string,
): Promise<boolean> {
  const [, count] = await deps.sequelize.query(
    `UPDATE ${effect.table} SET resumable_since = NULL, updated_at = $2
     WHERE id = $1 AND status = 'PROCESSING' AND resumable_since IS NOT NULL`,
    { bind: [id, new Date()], type: QueryTypes.UPDATE, transaction: t },
  );
  return count === 1;
}

/**
 * The attempt certainly did nothing downstream. Together, fenced on our owner token: the record
 * becomes FAILED_RETRYABLE (a retry with the same key executes again) and the resource becomes
 * resumable (the next request for its business key, with any key, executes it again: CONTRACT
 * section 3). false: fenced off, someone took the attempt over and owns its outcome; nothing written.
 */
export function markNotDone(deps: EffectDeps, effect: AnyEffect, lease: Lease, id: string): Promise<boolean> {
  return inTransaction<boolean>(deps.sequelize, async (t) => {
    if (!(await deps.engine.leases.markRetryable(lease, t))) return { rollback: false };
    const now = new Date();
    await deps.sequelize.query(
      `UPDATE ${effect.table} SET resumable_since = $2, updated_at = $2 WHERE id = $1 AND status = 'PROCESSING'`,
      { bind: [id, now], type: QueryTypes.UPDATE, transaction: t },
    );
    return { commit: true };
  });
}

export type Resumption =
  /** We won the resume: the record is ours again under a fresh lease. */
  | { kind: 'resumed'; lease: Lease }
  /** The resource became final through another key's resume: its answer, now stored for this key too. */
  | { kind: 'final'; reply: Reply }
  /** Another executor is at work on it. */
  | { kind: 'in_flight' }
  /** The record moved on meanwhile: look again. */
  | { kind: 'moved' }
  /** The user is at the in-flight cap: this resume would be one more PROCESSING record. */
  | { kind: 'limited' };

/**
 * A retry with the same key finds its record FAILED_RETRYABLE (the last attempt certainly did
 * nothing downstream). The resource decides: resumable → take the mark and the record together (one
 * winner); final → this key gets the final answer; PROCESSING without the mark → someone resumed it.
 */
export function resumeEffect(
  deps: EffectDeps,
  effect: AnyEffect,
  scope: { scopeKey: string; userScope: string },
  id: string,
): Promise<Resumption> {
  const { scopeKey, userScope } = scope;
  return inTransaction<Resumption>(deps.sequelize, async (t) => {
    if (await takeResume(deps, effect, t, id)) {
      if (!(await deps.engine.leases.takeSlot(t, userScope, scopeKey)))
        return { rollback: { kind: 'limited' } };
      const lease = await deps.engine.leases.takeOver(scopeKey, null, t);
      return lease ? { commit: { kind: 'resumed', lease } } : { rollback: { kind: 'moved' } };
    }
    const row = await effect.read(id, t);
    if (!row || row.status === 'PROCESSING') return { rollback: { kind: 'in_flight' } };
    const reply = effect.answer(row);
    await deps.engine.leases.finishRetryable(t, scopeKey, reply);
    return { commit: { kind: 'final', reply } };
  });
}

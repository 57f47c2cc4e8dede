import { isDatabaseUnavailable, uniqueViolation } from '../core/db-errors.js';
import type { DomainError } from '../core/errors.js';
import { isClaimBusy } from './at-once.js';
import type { Cap } from './caps.js';
import type { AnyEffect, EffectDeps, EffectRow, Gate } from './effect.js';
import { stepBoundary } from './effect.js';
import { takeResume } from './effect-resume.js';
import type { IdempotentRequest } from './engine.js';
import { inFoldedTransaction } from './folded-transaction.js';
import type { Lease } from './lease.js';
import type { Reply } from './outcome.js';
import type { StoredRecord } from './record-store.js';

export type Claim<Row> =
  /** Tx 1 committed our PROCESSING record (with its lease) and the new resource row. */
  | { kind: 'claimed'; lease: Lease; row: Row }
  /** The checks refused it: Tx 1 committed the record as FAILED_FINAL with this error. */
  | { kind: 'refused'; error: DomainError }
  /** A new key for a business key that is final already: Tx 1 committed the record with its answer. */
  | { kind: 'existing'; reply: Reply }
  /**
   * A request with a new key for a resumable resource (its own key, once purged, is refused 40905): Tx 1
   * took the resumable mark with our record, and the effect is executed again, query first.
   */
  | { kind: 'resumed'; lease: Lease; row: Row }
  /** A new key for a resource still in flight: nothing was kept. */
  | { kind: 'existing_in_flight'; row: Row }
  /** A record of this key was there instead. */
  | { kind: 'found'; record: StoredRecord }
  /** The same key's record is being inserted by a transaction still open (a duplicate in flight, or
   * a stalled instance): our bounded wait for it ended. */
  | { kind: 'key_in_flight' }
  /** No record inserted and none there: a per-user cap refused it. */
  | { kind: 'limited'; cap: Cap }
  /** A concurrent request created the resource first: claim again. */
  | { kind: 'again' }
  /**
   * Tx 1 would have claimed or resumed, but the connection was lost in its last round trip, the one
   * with COMMIT: it may have committed (then the record, its lease and the row are ours, and the
   * recoverer would perform the effect once the lease ends) or not (nothing was kept). Look again.
   */
  | { kind: 'unacknowledged'; lease: Lease; row: Row; first: 'perform' | 'resume' };

/** The reply a refusal is stored as (the error table of routers/, handed down by the caller). */
export type FailureReply = (error: DomainError) => Reply;

/**
 * Tx 1: the PROCESSING record with a fresh lease, then the effect's checks and its resource row,
 * committed together; or what was found instead of inserting. With a `gate`, its read ends the
 * claim's round trip and its refusal comes before anything else (effect.ts Gate).
 */
export async function claimEffect<Row extends EffectRow, In>(
  effect: AnyEffect,
  deps: EffectDeps,
  req: IdempotentRequest,
  request: In,
  failureReply: FailureReply,
  gate?: Gate<In>,
): Promise<Claim<Row>> {
  const { leases } = deps.engine;
  let claim: Claim<Row> | undefined;
  let refusedBy: Cap | null = null;
  // Whether the gate's rows came back and were judged (else admitAlone judges, below).
  let gated = gate === undefined;
  await deps.engine.slotRows.ensure(req.userScope);
  try {
    // BEGIN rides with the lease claim, COMMIT with the record's link to a new resource.
    claim = await inFoldedTransaction<Claim<Row> | undefined>(
      deps.sequelize,
      async (t) => {
        let claimed: Awaited<ReturnType<typeof leases.claim>>;
        try {
          // The effect's lookup rides with the claim, and so does the gate: one round trip for all.
          // The lookup is built from the request as it came (the gate may change the caller's role,
          // never the tenant or the user it names).
          claimed = await leases.claim(
            t,
            req,
            effect.lookup?.(request, req.scopeKey),
            gate?.statement,
            deps.engine.claimLockBudgetMs(req),
          );
        } catch (err) {
          // lock_timeout on our own key's uncommitted record: its request is in flight (202). Only the
          // claim's own wait says so (the lookup's, on a business row, is the request's error: 503).
          if (isClaimBusy(err)) return { rollback: { kind: 'key_in_flight' } };
          throw err;
        }
        // The gate's refusal first (thrown: the transaction rolls back, nothing is kept).
        gated = true;
        const admitted = gate ? gate.admit(claimed.gated ?? [], request) : request;
        if (!('lease' in claimed)) {
          refusedBy = claimed.cap;
          return { rollback: undefined };
        }
        const { lease } = claimed;
        const prepared = await effect.prepare(t, claimed.alongside, admitted);
        if (prepared.kind === 'refused') {
          await leases.finish(t, lease, 'FAILED_FINAL', failureReply(prepared.error));
          return { commit: { kind: 'refused', error: prepared.error } };
        }
        if (prepared.kind === 'existing') {
          const row = prepared.row as Row;
          if (row.status === 'PROCESSING') {
            // Its last attempt did nothing downstream and nobody is at it: this request resumes it (one winner).
            if (row.resumableSince && (await takeResume(deps, effect, t, row.id))) {
              await leases.attachResource(t, lease, row.id);
              return { commit: { kind: 'resumed', lease, row } };
            }
            // Its executor is still at work: our record must not stay behind (it would hold the cap).
            return { rollback: { kind: 'existing_in_flight', row } };
          }
          const reply = effect.answer(row);
          await leases.attachResource(t, lease, row.id);
          await leases.finish(t, lease, 'SUCCEEDED', reply);
          return { commit: { kind: 'existing', reply } };
        }
        await stepBoundary(effect, 'tx1.before-commit');
        const row = prepared.row as Row;
        // The resource row, the record's link to it and COMMIT: Tx 1's last round trip.
        return {
          commitWith: `${prepared.insert}\n${leases.attachResourceStatement(lease, row.id)}`,
          value: { kind: 'claimed', lease, row },
        };
      },
      unacknowledged,
    );
  } catch (err) {
    // The round trip failed before the gate's read ran (a tombstoned key, a lock wait ended): its
    // refusal still ranks first.
    if (!gated && gate) await gate.admitAlone(request);
    // Lost the race on the business key (a unique index): evaluate again against the winner's row.
    if (uniqueViolation(err) !== undefined) return { kind: 'again' };
    throw err;
  }
  if (!gated && gate) await gate.admitAlone(request);
  if (claim) return claim;
  return deps.engine.whyNotClaimed(req, refusedBy);
}

/** A claim or a resume whose COMMIT was sent and whose answer was lost with the connection. */
function unacknowledged<Row>(value: Claim<Row> | undefined, err: unknown): Claim<Row> | undefined {
  if (!isDatabaseUnavailable(err)) return undefined;
  if (value?.kind === 'claimed') return { ...value, kind: 'unacknowledged', first: 'perform' };
  if (value?.kind === 'resumed') return { ...value, kind: 'unacknowledged', first: 'resume' };
  return undefined;
}

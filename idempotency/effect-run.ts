import { answersUnavailable, isDatabaseUnavailable } from '../core/db-errors.js';
import { ServiceUnavailable } from '../core/errors.js';
import type { Effect, EffectDeps, EffectRow, Gate } from './effect.js';
import { stepBoundary } from './effect.js';
import { type Claim, claimEffect, type FailureReply } from './effect-claim.js';
import { markNotDone, resumeEffect } from './effect-resume.js';
import { type Settlement, settleEffect } from './effect-settle.js';
import { type Cancellation, type IdempotentRequest, sameRequest } from './engine.js';
import type { Lease } from './lease.js';
import type { Outcome, Reply } from './outcome.js';
import type { StoredRecord } from './record-store.js';

/**
 * One request for an effect (Mode B): the effect cannot be rolled back, so the flow is a state
 * machine of steps, each its own transaction or call (CONTRACT sections 3 and 5, DESIGN "Mode B"):
 * claim (Tx 1: record + resource row, or what was there instead) → perform, outside any transaction
 * → finalise (Tx 2, fenced on the owner token). A key whose attempt was abandoned is taken over, or
 * resumed when it certainly did nothing (by any request for its business key, with its own key or a
 * new one: CONTRACT section 3), and then settled query first. `gate`: a read that rides in the
 * claim's round trip and admits the request first (effect.ts Gate; the caller's user row).
 */
export async function runEffect<D extends EffectDeps, In, Row extends EffectRow, R>(
  effect: Effect<D, In, Row, R>,
  deps: D,
  request: IdempotentRequest,
  input: In,
  failureReply: FailureReply,
  signal?: Cancellation,
  gate?: Gate<In>,
): Promise<Outcome> {
  // A stored answer that cannot be read is rebuilt from the resource row (CONTRACT section 5).
  const req: IdempotentRequest = { ...request, rebuild: (id) => rebuildAnswer(effect, id) };
  const run = { effect, deps, req, signal };
  // A Tx 1 or a resume that may have committed (its COMMIT's answer was lost with the connection):
  // from then on the outcome is open, and `ours` is the lease that Tx 1 took, when it is known.
  let open = false;
  let ours: Extract<Claim<Row>, { kind: 'unacknowledged' }> | undefined;
  // Each pass ends in an answer, or looks again after losing a race (bounded: answers 202 after 4).
  for (let pass = 0; pass < 4; pass++) {
    let claim: Claim<Row>;
    try {
      claim = await claimEffect<Row, In>(effect, deps, req, input, failureReply, gate);
    } catch (err) {
      // Looking again failed too: the record may be ours and the recoverer would finish it, so the
      // answer is 202 (in flight: ask again with the same key), never the 503 "nothing was done".
      if (open && answersUnavailable(err)) return deps.engine.inFlight(req, null);
      throw err;
    }
    switch (claim.kind) {
      case 'claimed':
        return execute(run, claim.lease, claim.row, 'perform');
      case 'resumed':
        // Answered as a first execution would be (CONTRACT section 3); the downstream is asked first.
        return execute(run, claim.lease, claim.row, 'resume');
      case 'refused':
        return { kind: 'failed_final', error: claim.error };
      case 'existing':
        // A new key for a business key that already has this resource: its answer, nothing performed.
        return replayed(claim.reply);
      case 'existing_in_flight':
        return deps.engine.inFlight(req, claim.row.id);
      case 'key_in_flight':
        return deps.engine.inFlight(req, null);
      case 'limited':
        return deps.engine.limited(claim.cap);
      case 'unacknowledged':
        open = true;
        ours = claim;
        break;
      case 'found': {
        const { record } = claim;
        // Tx 1 did commit: the attempt is ours, under the lease it took, and nothing was sent yet.
        if (ours && isOurs(ours.lease, record)) return execute(run, ours.lease, ours.row, ours.first);
        const continued = await continueAttempt(run, record);
        if (continued === 'unacknowledged') open = true;
        else if (continued) return continued;
        break; // another executor won the takeover: look again
      }
      case 'again':
        break;
    }
  }
  return deps.engine.inFlight(req, null);
}

/** Tx 1 committed our attempt under `lease`: perform (or, resumed, ask first), then answer. */
function execute<D extends EffectDeps, In, Row extends EffectRow, R>(
  run: Run<D, In, Row, R>,
  lease: Lease,
  row: Row,
  first: 'perform' | 'resume',
): Promise<Outcome> {
  const { effect, deps } = run;
  return underLease(run, lease, row.id, async () => {
    if (first === 'perform') await stepBoundary(effect, 'tx1.after-commit');
    const settlement = await settleEffect(effect, deps, lease, row, first);
    return answer(run, 'executed', lease, row, settlement);
  });
}

/** The record is still PROCESSING under the lease we took, and the lease still runs. */
function isOurs(lease: Lease, record: StoredRecord): boolean {
  return record.status === 'PROCESSING' && record.ownerToken === lease.owner && !record.leaseExpired;
}

interface Run<D extends EffectDeps, In, Row extends EffectRow, R> {
  effect: Effect<D, In, Row, R>;
  deps: D;
  req: IdempotentRequest;
  signal?: Cancellation;
}

/**
 * A record of this key is there. The same request whose attempt was abandoned continues it: resumed
 * when it certainly did nothing (FAILED_RETRYABLE), taken over when its lease ended. Anything else is
 * answered as a duplicate (replay, 202, or 409 for another request). undefined: lost the takeover;
 * 'unacknowledged': the resume's connection was lost, and it may have committed.
 */
async function continueAttempt<D extends EffectDeps, In, Row extends EffectRow, R>(
  run: Run<D, In, Row, R>,
  record: StoredRecord,
): Promise<Outcome | 'unacknowledged' | undefined> {
  const { effect, deps, req, signal } = run;
  const { resourceId } = record;
  if (!sameRequest(req, record) || !resourceId) return deps.engine.answerDuplicate(req, record, signal);
  let lease: Lease | undefined;
  let first: 'query' | 'resume' = 'query';
  if (record.status === 'FAILED_RETRYABLE') {
    const resumption = await resumeEffect(deps, effect, req, resourceId).catch((err: unknown) => {
      // The resume may have committed (the mark and the record ours under a lease we never learnt):
      // look again (runEffect).
      if (isDatabaseUnavailable(err)) return { kind: 'unacknowledged' } as const;
      throw err;
    });
    if (resumption.kind === 'unacknowledged') return 'unacknowledged';
    if (resumption.kind === 'limited') return deps.engine.limited('in-flight');
    if (resumption.kind === 'final') return replayed(resumption.reply);
    if (resumption.kind === 'in_flight') return deps.engine.inFlight(req, resourceId);
    if (resumption.kind === 'moved') return undefined;
    lease = resumption.lease;
    first = 'resume';
  } else if (record.status === 'PROCESSING' && record.leaseExpired) {
    // One winner among requests, recoverers and reconcile runs: the update names the previous owner.
    // Not taken for want of the database: the attempt stays in flight, and the recoverer finishes it.
    const taken = await deps.engine.leases.takeOver(req.scopeKey, record.ownerToken).catch((err: unknown) => {
      if (answersUnavailable(err)) return 'unavailable' as const;
      throw err;
    });
    if (taken === 'unavailable') return deps.engine.inFlight(req, resourceId);
    lease = taken;
  } else return deps.engine.answerDuplicate(req, record, signal);
  if (!lease) return undefined;
  const held = lease;
  return underLease(run, held, resourceId, async () => {
    await stepBoundary(effect, first === 'resume' ? 'resume' : 'takeover');
    const row = await rowOfRecord(effect, resourceId);
    const settlement = await settleEffect(effect, deps, held, row, first);
    return answer(run, 'lease_takeover', held, row, settlement);
  });
}

/**
 * The part of an attempt done under our lease: the resource is PROCESSING and ours until Tx 2 or the
 * resumable mark commits. When the database fails meanwhile (Tx 2 after a charge, the mark after a
 * 5xx, anything in between), it stays so, and the recoverer finishes it once the lease ends: query
 * first, then perform. Its client is therefore told 202 with Location, the answer of a resource in
 * flight, and never 503, which tells a client that nothing was done (CONTRACT section 3): one that
 * gave up after it would find its order charged later. Retry-After: the rest of the lease.
 */
async function underLease<D extends EffectDeps, In, Row extends EffectRow, R>(
  run: Run<D, In, Row, R>,
  lease: Lease,
  id: string,
  work: () => Promise<Outcome>,
): Promise<Outcome> {
  try {
    return await work();
  } catch (err) {
    if (!answersUnavailable(err)) throw err;
    return run.deps.engine.inFlight(run.req, id, lease.until - Date.now());
  }
}

/** What the client is told once the downstream part has run. */
async function answer<D extends EffectDeps, In, Row extends EffectRow, R>(
  run: Run<D, In, Row, R>,
  kind: 'executed' | 'lease_takeover',
  lease: Lease,
  row: Row,
  settlement: Settlement,
): Promise<Outcome> {
  const { effect, deps, req } = run;
  switch (settlement.kind) {
    case 'final':
      return { kind, reply: settlement.reply };
    case 'not_done': {
      // The 503 below only once the mark is written (else 202: underLease).
      const marked = await markNotDone(deps, effect, lease, row.id);
      // Fenced off meanwhile: whoever took over owns the outcome, answer from the record.
      if (!marked) return answerFromRecord(run, row.id);
      const message = `${effect.downstream} unavailable; retry with the same Idempotency-Key`;
      const error = new ServiceUnavailable(message, 1);
      return { kind: 'failed_retryable', error };
    }
    case 'fenced':
      return answerFromRecord(run, row.id);
    case 'pending':
      return deps.engine.inFlight(req, row.id, settlement.retryAfterMs);
  }
}

/** Whoever fenced us off owns the outcome: answer from the record as it stands. */
async function answerFromRecord<D extends EffectDeps, In, Row extends EffectRow, R>(
  run: Run<D, In, Row, R>,
  id: string,
): Promise<Outcome> {
  const { deps, req, signal } = run;
  const current = await deps.engine.current(req.scopeKey);
  return current ? deps.engine.answerDuplicate(req, current, signal) : deps.engine.inFlight(req, id);
}

/** The resource a record points at (its resource id). */
export async function rowOfRecord<Row extends EffectRow>(
  effect: { read(id: string): Promise<Row | undefined>; name: string },
  id: string,
): Promise<Row> {
  const row = await effect.read(id);
  if (!row) throw new Error(`resource ${id} of an idempotency record of ${effect.name} is missing`);
  return row;
}

/** The answer of a resource as its row tells it: final → its answer; still PROCESSING → none (202). */
async function rebuildAnswer<Row extends EffectRow>(
  effect: { read(id: string): Promise<Row | undefined>; answer(row: Row): Reply },
  id: string,
): Promise<Reply | undefined> {
  const row = await effect.read(id);
  return row && row.status !== 'PROCESSING' ? effect.answer(row) : undefined;
}

/** An answer given before, to this key or another: marked as a replay. */
function replayed(reply: Reply): Outcome {
  return {
    kind: 'replayed',
    reply: { ...reply, headers: { ...reply.headers, 'Idempotent-Replayed': 'true' } },
  };
}

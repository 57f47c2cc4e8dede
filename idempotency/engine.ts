import { setTimeout as sleep } from 'node:timers/promises';
import type { Sequelize, Transaction } from 'sequelize';
import { isDatabaseBusy, isLockNotAvailable } from '../core/db-errors.js';
import { processing } from '../core/envelope.js';
import { Conflict, KeyExpired, ServiceUnavailable, TooManyRequests } from '../core/errors.js';
import { anyArmed, failpoint } from '../core/failpoints.js';
import type { UserCheck } from '../models/user.js';
import { businessStatementError, executeAtOnce } from './at-once.js';
import { type Cap, type ClaimResult, claimedGuard, SlotRows } from './caps.js';
import { mismatchedFields } from './fingerprint.js';
import { FoldedTransaction } from './folded-transaction.js';
import { LeaseStore } from './lease.js';
import { OpenedReplies } from './opened-replies.js';
import type { Outcome, Reply } from './outcome.js';
import type { Placeholder } from './placeholder.js';
import { RecentKeys } from './recent-keys.js';
import {
  type ClaimRequest,
  claimLocal,
  type FinalState,
  finishLocal,
  finishStatement,
  type Limits,
  readRecord,
  type StoredRecord,
} from './record-store.js';
import type { ResponseCipher } from './response-cipher.js';
import { sealReply } from './stored-reply.js';

/**
 * What the waits check to stop early: the client went away. An AbortSignal is one; the REST facade
 * gives a cheaper object that looks at the response (no AbortController per request).
 */
export interface Cancellation {
  readonly aborted: boolean;
}

export interface IdempotentRequest extends ClaimRequest {
  /** Canonical REST path of the resource a 202 points at, when its id is known. */
  location?: (resourceId: string) => string;
  /**
   * The id of the existing resource the request acts on (a PATCH, PUT or DELETE of `/…/{id}`): known
   * before any record is, so an in-flight duplicate's 202 names it (CONTRACT section 7: `Location` on
   * a 202 whose resource id is known).
   */
  subjectId?: string;
  /**
   * The answer rebuilt from the resource itself, for a stored answer that can no longer be decrypted
   * (payments: the payment row holds everything its answer says). undefined: cannot be rebuilt.
   */
  rebuild?: (resourceId: string) => Promise<Reply | undefined>;
  /**
   * When the request arrived (Date.now()): its wait bound runs from here, whatever it waited for on
   * the way (a pooled connection for the auth read, the placeholder). Unset: from the engine's call.
   */
  receivedAt?: number;
}

/**
 * What runAtOnce did: answered the request; refused it by the user row's rule (nothing read or
 * written: the row, or its absence, says which 403); or left it to the general path (runLocal after
 * the auth read), which answers every case the one statement does not.
 */
export type AtOnce =
  | { kind: 'answered'; outcome: Outcome }
  | { kind: 'refused'; user: { status: string | null; role: string | null } }
  | { kind: 'general' };

/** What the operation of a Mode A request did inside the engine's transaction. */
export type LocalResult =
  | { ok: true; reply: Reply; resourceId: string | null }
  /** A failure the request caused: stored (FAILED_FINAL) and replayed to every retry. */
  | { ok: false; reply: Reply; error: unknown };

/**
 * Mode A work given as one statement instead of a function of the transaction: it is sent in the
 * claim's own round trip, after the claim and its savepoint, and writes only if the claim inserted
 * the record (claimedGuard). A create is then 3 round trips (auth read, claim with the write, final
 * state with COMMIT) instead of 4.
 */
export interface LocalStatement {
  /** The write with literal values, writing only where `guard` (an SQL condition) holds. */
  sql(guard: string): string;
  /** What the request did, from the rows the write returned. */
  settle(rows: unknown[]): LocalResult;
  /** What the request did, from the error the write failed with; throws for a failure it did not cause. */
  fail(error: unknown): LocalResult;
  /**
   * What the request does when the write succeeds, known before it (the new row's id and time were
   * allocated by the auth read): the record's final state is then sent in the claim's round trip
   * too, after the write, with the COMMIT. A keyed create is 2 round trips instead of 3.
   */
  answer?: Extract<LocalResult, { ok: true }>;
}

/**
 * The failpoints between a Mode A claim and its commit. A request whose final state would ride with
 * the claim has no such moment: with any of them active it takes the path that has them.
 */
const BETWEEN_CLAIM_AND_COMMIT = ['local.after-claim', 'local.after-write', 'local.before-commit'] as const;

/** Mode A work: run inside the engine's transaction, or one statement sent with the claim. */
export type LocalWork = ((tx: Transaction) => Promise<LocalResult>) | LocalStatement;

export interface EngineSettings extends Limits {
  leaseMs: number;
  /** Told when a stored answer cannot be read (a key rotated without its id, a damaged row). */
  onUnreadable?: (scopeKey: string, err: unknown) => void;
}

/** Why a claim inserted nothing: a record is there, or a cap. */
export type LostClaim = { kind: 'found'; record: StoredRecord } | { kind: 'limited'; cap: Cap };

/**
 * A finished record past its expiry is a dead key, as if purged already (docs/DECISIONS.md): its
 * request gets 40905 and executes nothing; the purge turns it into a tombstone. Executing it afresh
 * would re-execute a forgotten key on exactly the timing the tombstone guards (a retry just after the
 * TTL). A PROCESSING record is work in progress, whatever its expiry.
 */
function refuseIfDead(record: StoredRecord): void {
  if (record.expired && record.status !== 'PROCESSING') throw new KeyExpired();
}

const POLL_MS = 25;

/** The fields that differ from the first request (none named for records kept before field digests). */
function mismatchOf(req: ClaimRequest, found: StoredRecord): string[] | undefined {
  if (!found.fieldHashes || !req.fieldHashes) return undefined;
  try {
    return mismatchedFields(JSON.parse(found.fieldHashes) as Record<string, string>, req.fieldHashes);
  } catch {
    return undefined;
  }
}

/** The stored record is of this same request (its digest, or its fp1 digest for an older record). */
export function sameRequest(req: ClaimRequest, found: StoredRecord): boolean {
  return found.requestHash === req.requestHash || (!!req.legacyHash && found.requestHash === req.legacyHash);
}

/** Whole milliseconds until `deadline`, at least 1 (a lock_timeout of 0 would mean no bound). */
const msLeft = (deadline: number): number => Math.max(1, Math.floor(deadline - Date.now()));

/**
 * The idempotency protocol of CONTRACT section 5 on PostgreSQL. It knows no HTTP and no tRPC: it
 * stores and replays the replies the layer above gives it, and answers duplicates, waits and caps.
 * Mode A (`runLocal`) runs an operation inside its own transaction; Mode B (payments) claims a lease
 * through `leases` and drives the external call itself.
 */
export class IdempotencyEngine {
  readonly leases: LeaseStore;
  readonly slotRows: SlotRows;
  /** Keys this process saw a record of lately: their retries take the auth read first (recent-keys.ts). */
  readonly recent = new RecentKeys();
  /** Replies this process decrypted lately, by the sealed text they came from (opened-replies.ts). */
  private readonly opened: OpenedReplies;

  constructor(
    private readonly sequelize: Sequelize,
    private readonly settings: EngineSettings,
    private readonly cipher: ResponseCipher,
    private readonly placeholder?: Placeholder,
  ) {
    this.leases = new LeaseStore(sequelize, cipher, settings.leaseMs, settings);
    this.slotRows = new SlotRows(sequelize, settings.maxInFlight);
    this.opened = new OpenedReplies(cipher);
  }

  /**
   * Mode A: the business write and the record's final state commit in one transaction. Exactly one
   * of any number of concurrent duplicates (any instance, any transport) inserts the record; the
   * others wait on its primary key (bounded by lock_timeout) and then replay, or get 202.
   */
  async runLocal(
    req: IdempotentRequest,
    work: LocalWork,
    signal?: Cancellation,
    prefetched?: { record: StoredRecord | undefined },
  ): Promise<Outcome> {
    // Fast path for retries: one indexed read, no transaction (or the caller's read of this scope,
    // made with its auth lookup). A finished record is answered at once (replay or 40901); a missing
    // one (the common case for a new key) goes on to the claim, which decides every race anyway.
    const existing = prefetched ? prefetched.record : await readRecord(this.sequelize, req.scopeKey);
    const answered = await this.answerFromRecord(req, existing, signal);
    if (answered) return answered;

    const deadline = this.waitDeadline(req);
    await this.slotRows.ensure(req.userScope);
    const heldPlaceholder = await this.placeholder?.acquire(req.scopeKey);
    try {
      if (heldPlaceholder === false) {
        // Someone holds the placeholder: most likely a duplicate in flight. Wait for its record by
        // polling, outside PostgreSQL (no connection or lock held), within the same wait bound.
        const found = await this.pollForRecord(req.scopeKey, deadline, signal);
        if (found) return await this.answerDuplicate(req, found, signal);
        // Not there yet: the claim below decides, with only the time left of the bound. If the
        // holder is alive it holds the key's row lock and we get 202; if it crashed, we execute.
      }
      return await this.tryLocal(req, work, deadline, signal);
    } finally {
      if (heldPlaceholder) await this.placeholder?.release(req.scopeKey, heldPlaceholder);
    }
  }

  /**
   * runAtOnce can take a request now: no Redis placeholder and no failpoint between claim and commit
   * (steps of the general path it has not). Which path a keyed create takes is chosen in one place:
   * routers/keyed-path.ts chooseKeyedPath.
   */
  atOnceSupported(): boolean {
    return !this.placeholder && !anyArmed(BETWEEN_CLAIM_AND_COMMIT);
  }

  /**
   * Mode A in one statement and one round trip (at-once.ts, idem_execute): a keyed create whose answer
   * is known before its write (`work.answer`: its id and time were taken beforehand). The user row's
   * rule (`check`) is checked by the statement, the key's record read by it, and, when the key is new,
   * the claim inserts the record in its final state and the business statement writes, as one
   * transaction. Everything else (the user refused; a record found, which is answered here as after
   * the auth read; a lost claim) is decided from what the statement returns. A failed business
   * statement leaves nothing behind and goes to the general path, which stores a final failure.
   * Not taken (`general` at once) where the general path has a step this one has not: the Redis
   * placeholder, and a failpoint between claim and commit.
   */
  async runAtOnce(
    req: IdempotentRequest,
    work: LocalStatement,
    check: UserCheck,
    signal?: Cancellation,
  ): Promise<AtOnce> {
    const known = work.answer;
    if (!known || !this.atOnceSupported()) return { kind: 'general' };
    await this.slotRows.ensure(req.userScope);
    await failpoint('local.before-claim');
    const final = this.finalState(req, known);
    const business = work.sql(claimedGuard(req.scopeKey));
    let row: Awaited<ReturnType<typeof executeAtOnce>>;
    try {
      // The claim's lock wait gets what is left of the bound (a wait for the pool came first).
      const limits = { ...this.settings, waitMs: this.waitLeftMs(req) };
      row = await executeAtOnce(this.sequelize, req, limits, check, final, business);
    } catch (err) {
      const answered = (outcome: Outcome): AtOnce => ({ kind: 'answered', outcome });
      if (!businessStatementError(err)) {
        // Waited the whole bound on a duplicate's claim: it is still running.
        if (isLockNotAvailable(err)) return answered(this.inFlight(req, null));
        throw err;
      }
      // The business write waited the whole bound on another transaction's row (or deadlocked):
      // nothing was kept, and the general path would wait again.
      if (isDatabaseBusy(err)) {
        const error = new ServiceUnavailable('Database busy; retry with the same Idempotency-Key');
        return answered({ kind: 'rolled_back', error });
      }
      return { kind: 'general' };
    }
    switch (row.kind) {
      case 'refused':
        return row;
      case 'claimed':
        this.recent.add(req.scopeKey);
        await failpoint('local.after-commit');
        return { kind: 'answered', outcome: { kind: 'executed', reply: known.reply } };
      case 'found':
        refuseIfDead(row.record);
        return { kind: 'answered', outcome: await this.answerDuplicate(req, row.record, signal) };
      case 'lost': {
        if (row.slotsMissing) return { kind: 'general' };
        const lost = await this.whyNotClaimed(req, row.cap);
        const outcome =
          lost.kind === 'limited'
            ? this.limited(lost.cap)
            : await this.answerDuplicate(req, lost.record, signal);
        return { kind: 'answered', outcome };
      }
    }
  }

  /**
   * One claim and, when it is ours, the operation. `deadline`: the end of the request's wait bound
   * (CONTRACT section 5); the claim's lock_timeout is what is left of it once a pooled connection is
   * taken, so a wait for the placeholder or for the pool is not waited again on a lock (and
   * idem_claim leaves the business write only what its own wait left: migration 20261128000601).
   */
  private async tryLocal(
    req: IdempotentRequest,
    work: LocalWork,
    deadline: number,
    signal?: Cancellation,
  ): Promise<Outcome> {
    // Before any connection is taken: a fault here leaves nothing to roll back.
    await failpoint('local.before-claim');
    const statement = typeof work === 'function' ? undefined : work;
    const guard = claimedGuard(req.scopeKey);
    // A success known before the write: its final state goes with the claim, and so does COMMIT.
    const known = statement?.answer && !anyArmed(BETWEEN_CLAIM_AND_COMMIT) ? statement.answer : undefined;
    const finish = known && finishStatement(this.finalState(req, known), guard);
    // BEGIN rides with the claim and COMMIT with the final update (folded-transaction.ts).
    const t = await FoldedTransaction.open(this.sequelize);
    const waitMs = msLeft(deadline);
    let claim: ClaimResult | { claimed: true; failed: unknown };
    try {
      claim = await claimLocal(
        this.sequelize,
        t,
        req,
        { ...this.settings, waitMs },
        statement?.sql(guard),
        finish,
      );
      // The whole transaction ran, to its COMMIT: claimed and finished, or (not claimed) nothing written.
      if (finish) t.committedInline();
      // Inside the try: a fault after the claim must roll back like any other failure here, or the
      // folded transaction (the record's row, the key's lock, a slot) stays open on its connection.
      else if (claim.claimed) await failpoint('local.after-claim');
    } catch (err) {
      if (statement && businessStatementError(err)) {
        // The write sent with the claim failed, so the claim was ours (the write runs only then);
        // the transaction is aborted, and the final state below starts with ROLLBACK TO SAVEPOINT.
        claim = { claimed: true, failed: err };
      } else {
        await t.rollback().catch(() => {});
        // Waited the whole bound on a duplicate's uncommitted record: it is still running.
        if (isLockNotAvailable(err)) return this.inFlight(req, null);
        throw err;
      }
    }
    if (!claim.claimed) {
      if (!finish) await t.rollback();
      const lost = await this.whyNotClaimed(req, claim.cap);
      return lost.kind === 'limited'
        ? this.limited(lost.cap)
        : this.answerDuplicate(req, lost.record, signal);
    }

    this.recent.add(req.scopeKey);
    if (known && !('failed' in claim)) {
      await failpoint('local.after-commit');
      return { kind: 'executed', reply: known.reply };
    }

    let result: LocalResult;
    try {
      if (typeof work === 'function') result = await work(t);
      else result = 'failed' in claim ? work.fail(claim.failed) : work.settle(claim.after);
      await failpoint('local.after-write');
    } catch (err) {
      // Transient (5xx, unknown): roll everything back so no PROCESSING row is left; a retry executes.
      await t.rollback().catch(() => {});
      const busy = isDatabaseBusy(err);
      return {
        kind: 'rolled_back',
        error: busy ? new ServiceUnavailable('Database busy; retry with the same Idempotency-Key') : err,
      };
    }
    try {
      const final = this.finalState(req, result);
      await failpoint('local.before-commit');
      await finishLocal(t, final);
    } catch (err) {
      await t.rollback().catch(() => {});
      throw err;
    }
    await failpoint('local.after-commit');
    return result.ok
      ? { kind: 'executed', reply: result.reply }
      : { kind: 'failed_final', error: result.error };
  }

  /** The record's final state for what the request did: its reply sealed (stored-reply.ts). */
  private finalState(req: IdempotentRequest, result: LocalResult): FinalState {
    return {
      scopeKey: req.scopeKey,
      status: result.ok ? 'SUCCEEDED' : 'FAILED_FINAL',
      httpStatus: result.reply.status,
      responseBody: sealReply(this.cipher, req.scopeKey, result.reply),
      resourceId: result.ok ? result.resourceId : null,
    };
  }

  /**
   * A claim inserted nothing: the record that was there instead, or (none at all) a per-user cap. An
   * expired record refuses the key (refuseIfDead).
   */
  async whyNotClaimed(req: ClaimRequest, cap: Cap | null): Promise<LostClaim> {
    const existing = await readRecord(this.sequelize, req.scopeKey);
    if (!existing) return { kind: 'limited', cap: cap ?? 'in-flight' };
    refuseIfDead(existing);
    return { kind: 'found', record: existing };
  }

  /** The lease of a Mode B attempt (how long an executor may work before a takeover). */
  get leaseMs(): number {
    return this.settings.leaseMs;
  }

  /** The record of this scope as it stands now (e.g. after being fenced off). */
  current(scopeKey: string): Promise<StoredRecord | undefined> {
    return readRecord(this.sequelize, scopeKey);
  }

  /**
   * What a key's record already answers, before any work is built: a replay, 40901, 202 (or 40905
   * for a dead key, thrown). undefined without a record, or with an expired one still to be claimed.
   */
  async answerFromRecord(
    req: IdempotentRequest,
    record: StoredRecord | undefined,
    signal?: Cancellation,
  ): Promise<Outcome | undefined> {
    if (!record) return undefined;
    refuseIfDead(record);
    return record.expired ? undefined : this.answerDuplicate(req, record, signal);
  }

  /** Same scope seen again: compare fingerprints, then replay, or wait for the one in flight. */
  async answerDuplicate(
    req: IdempotentRequest,
    found: StoredRecord,
    signal?: Cancellation,
  ): Promise<Outcome> {
    this.recent.add(req.scopeKey);
    if (!sameRequest(req, found)) {
      const error = new Conflict('key_reused', 'Idempotency-Key was already used with a different request', {
        mismatch: mismatchOf(req, found),
      });
      return { kind: 'mismatch', error };
    }
    let record = found;
    const deadline = this.waitDeadline(req);
    while (record.status === 'PROCESSING' && Date.now() < deadline && !signal?.aborted) {
      await sleep(Math.min(POLL_MS, msLeft(deadline)));
      const again = await readRecord(this.sequelize, req.scopeKey);
      if (!again) return this.inFlight(req, record.resourceId, record.leaseLeftMs ?? undefined);
      record = again;
    }
    if (record.status === 'SUCCEEDED' || record.status === 'FAILED_FINAL')
      return await this.replay(req, record);
    return this.inFlight(req, record.resourceId, record.leaseLeftMs ?? undefined);
  }

  /**
   * The end of the request's wait bound (CONTRACT section 5: IDEMPOTENCY_WAIT_MS for another request's
   * work, whatever holds it, a busy connection pool included): from its arrival when known.
   */
  waitDeadline(req: IdempotentRequest): number {
    return (req.receivedAt ?? Date.now()) + this.settings.waitMs;
  }

  /** What is left of the request's wait bound (msLeft). */
  waitLeftMs(req: IdempotentRequest): number {
    return msLeft(this.waitDeadline(req));
  }

  /**
   * A lock_timeout for a claim sent on the session's own (the whole bound: core/database.ts), when
   * the request has already spent more than 1% of its bound before it (a pooled connection's wait):
   * what is left. undefined: the session's bound is close enough, and nothing more is sent.
   */
  claimLockBudgetMs(req: IdempotentRequest): number | undefined {
    const left = this.waitLeftMs(req);
    return left < this.settings.waitMs * 0.99 ? left : undefined;
  }

  /**
   * 202: the first request is still running; the client polls Location or retries after Retry-After:
   * when trying again is useful, in whole seconds, at least 1: the time left on the running attempt's
   * lease when there is one (a retry can take over only then), else the wait bound.
   */
  inFlight(req: IdempotentRequest, recorded: string | null, retryAfterMs = this.settings.waitMs): Outcome {
    const headers: Record<string, string> = {
      'Retry-After': String(Math.max(1, Math.ceil(retryAfterMs / 1000))),
    };
    const resourceId = recorded ?? req.subjectId ?? null;
    if (resourceId && req.location) headers.Location = req.location(resourceId);
    return { kind: 'in_flight', reply: { status: 202, headers, body: processing(resourceId) } };
  }

  /** No conflicting record, yet the insert did not happen: a per-user cap refused it. */
  limited(cap: Cap): Outcome {
    const error =
      cap === 'in-flight'
        ? new TooManyRequests('too_many_in_flight', 'Too many requests in progress for this user', 1)
        : new TooManyRequests('too_many_retained', 'Too many idempotency keys retained for this user', 60);
    return { kind: 'limited', error };
  }

  /**
   * The stored answer, marked as a replay. One that cannot be read (a key rotated without a new key
   * id, a damaged row) is rebuilt from its resource when the operation can (payments), and otherwise
   * answered 409 40903, logged: never a 500 for the record's whole TTL, and never a second execution.
   */
  private async replay(req: IdempotentRequest, record: StoredRecord): Promise<Outcome> {
    try {
      return { kind: 'replayed', reply: this.opened.replayed(req.scopeKey, record.responseBody ?? '') };
    } catch (err) {
      this.settings.onUnreadable?.(req.scopeKey, err);
    }
    const stored = req.rebuild && record.resourceId ? await req.rebuild(record.resourceId) : undefined;
    if (!stored) {
      const error = new Conflict(
        'state_conflict',
        'The stored answer of this Idempotency-Key cannot be read; the request was executed once and is not executed again',
      );
      return { kind: 'failed_final', error };
    }
    const headers = { ...stored.headers, 'Idempotent-Replayed': 'true' };
    return { kind: 'replayed', reply: { ...stored, headers } };
  }

  private async pollForRecord(
    scopeKey: string,
    deadline: number,
    signal?: Cancellation,
  ): Promise<StoredRecord | undefined> {
    while (Date.now() < deadline && !signal?.aborted) {
      await sleep(Math.min(POLL_MS, msLeft(deadline)));
      const found = await readRecord(this.sequelize, scopeKey);
      if (found && !found.expired) return found;
    }
    return undefined;
  }
}

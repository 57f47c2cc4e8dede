import { QueryTypes, type Sequelize, type Transaction } from 'sequelize';
import { isLockNotAvailable } from '../core/db-errors.js';
import { sqlLiteral, sqlResults } from '../core/sql.js';
import { buryStatement, refusingExpired } from './tombstones.js';

/**
 * The per-user caps of CONTRACT section 5, strict and O(1) in the number of keys a user holds.
 *
 * In flight: a user has IDEMPOTENCY_MAX_IN_FLIGHT slot rows (idempotency_slots). A claim takes a
 * free one with FOR UPDATE SKIP LOCKED inside its transaction, so concurrent claims never share one
 * and none waits for another: a Mode A request holds its slot's row lock until it commits (its
 * PROCESSING record is invisible to others until then, which is why counting records could not be
 * strict); a Mode B record also writes itself as the slot's holder, so the slot stays taken while
 * the record is PROCESSING, across its commit, a crash and a takeover, until the statement that
 * takes the record out of PROCESSING gives the slot back.
 *
 * Retained: each slot row counts the records claimed through it, decremented when a record is
 * purged or deleted; the cap reads the SUM over the user's slot rows (at most MAX_IN_FLIGHT rows).
 * The counter includes expired records not purged yet, so it can only over-count: below the cap it
 * admits at once; at or above it, the exact count of unexpired records decides (bounded by LIMIT),
 * so an expired key never refuses anyone.
 */

export type Cap = 'in-flight' | 'retained';

/**
 * A slot row (alias s) is free when no Mode B record holds it. The holder is cleared in the same
 * statement that takes its record out of PROCESSING (lease.ts), so the row itself tells, and a
 * concurrent claim that re-checks a row updated under it (READ COMMITTED re-evaluates the condition
 * on the newest row version) sees the holder. A holder whose record is visibly no longer PROCESSING
 * also counts as free (a stale holder heals); one whose record is not visible yet is busy. The
 * holder's record is read by a scalar subquery, never an EXISTS: under the OR, PostgreSQL may hash
 * an EXISTS, reading every finished record, when the table looked small at planning time (idem_claim
 * keeps its plan per connection; migration 20261128000401 made it this same condition).
 */
const SLOT_IS_FREE = `(s.holder IS NULL OR COALESCE((
      SELECT h.status <> 'PROCESSING' FROM idempotency_records h WHERE h.scope_key = s.holder), false))`;

export interface ClaimValues {
  scopeKey: string;
  requestHash: string;
  userScope: string;
  operation: string;
  ttlSeconds: number;
  maxInFlight: number;
  maxRetained: number;
  /** Digests of the body's fields (stored to name the fields of a later 409). */
  fieldHashes?: Record<string, string>;
  /** Mode B: the lease owner and length; the record then holds its slot while PROCESSING. */
  lease?: { owner: string; seconds: number };
}

export type ClaimResult =
  /** `after`: the rows of the statement sent after the claim (a business write, a lookup). */
  ({ claimed: true; slot: number; after: unknown[] } | { claimed: false; cap: Cap | null }) & {
    /** The rows of `wrap.last` (the round trip's last statement), whatever the claim's outcome. */
    last?: unknown[];
  };

/**
 * The condition under which a statement sent after the claim in the same round trip may write: the
 * claim inserted this key's record in this transaction (idem_claim marks it, transaction-local).
 */
export function claimedGuard(scopeKey: string): string {
  return `current_setting('idem.claimed', true) = ${sqlLiteral(scopeKey)}`;
}

/**
 * The claim as one statement (values as escaped literals, for the caller's multi-statement round
 * trip): a call of `idem_claim`, which the migration 20261124000001-hot-path-functions.cjs defines
 * (PL/pgSQL, so its plan is kept per connection instead of planned on every request). In order, as
 * one statement: a transaction-scoped advisory lock on the key's hash, so duplicates of one key
 * claim one at a time (without it, duplicates waiting on the first one's uncommitted record each held
 * an in-flight slot while they waited, and the next duplicate, finding every slot taken and no record
 * visible yet, was refused 429 although it carried the same key: 60 identical creates through nginx
 * saw three; a waiting duplicate now holds nothing, and the wait is bounded by the caller's
 * lock_timeout; a hash collision only serialises two claims); a free slot (the condition of SLOT_IS_FREE above, FOR
 * UPDATE SKIP LOCKED); room under the retained cap (the slot counters' sum; the exact count of
 * unexpired records, bounded by LIMIT, only at or above the cap); the record's insert (ON CONFLICT
 * DO NOTHING: one of any number of concurrent requests inserts); the slot's counter, and its holder
 * for a leased (Mode B) record.
 */
export function claimStatement(lit: (value: string) => string, v: ClaimValues): string {
  const args = [
    lit(v.scopeKey),
    lit(v.requestHash),
    lit(v.userScope),
    lit(v.operation),
    String(Number(v.ttlSeconds)),
    String(Math.floor(v.maxInFlight)),
    String(Math.floor(v.maxRetained)),
    v.fieldHashes ? lit(JSON.stringify(v.fieldHashes)) : 'NULL',
    v.lease ? lit(v.lease.owner) : 'NULL',
    v.lease ? String(Number(v.lease.seconds)) : 'NULL',
  ];
  return `SELECT * FROM idem_claim(${args.join(', ')});`;
}

interface ClaimRow {
  claimed: number | null;
  free: number | null;
  slots: number;
  room: boolean | null;
}

/**
 * Runs a claim (with `before`/`after` statements in the same round trip, e.g. SET LOCAL and a
 * SAVEPOINT) and reads what happened. A user's first claim creates their slot rows, committed on
 * their own so that concurrent first claims never wait on each other, then claims again. `last`, one
 * read-only statement, ends every attempt's round trip; its rows come back whatever the outcome (it
 * does not run when a statement before it fails: a claim's lock wait ended, a tombstone).
 */
export async function runClaim(
  sequelize: Sequelize,
  t: Transaction,
  values: ClaimValues,
  wrap: { first?: string; before?: string; after?: string; last?: string } = {},
): Promise<ClaimResult> {
  const lit = sqlLiteral;
  const sql = `${wrap.before ?? ''}\n${claimStatement(lit, values)}\n${wrap.after ?? ''}\n${wrap.last ?? ''}`;
  for (let attempt = 0; ; attempt++) {
    // `first` (e.g. the BEGIN of a folded transaction) goes with the first attempt only.
    const text = attempt === 0 && wrap.first ? `${wrap.first}\n${sql}` : sql;
    // A tombstoned key: idem_claim raised, the caller rolls the transaction back (nothing written).
    const results = await refusingExpired(() => sqlResults<ClaimRow>(sequelize, text, undefined, t));
    const last = wrap.last === undefined ? undefined : results.pop()?.rows;
    const row = results.flatMap((r) => r.rows).find((r) => r && 'claimed' in r);
    if (!row) throw new Error('claim statement returned no row');
    if (row.claimed !== null) {
      return { claimed: true, slot: Number(row.claimed), after: results[results.length - 1].rows, last };
    }
    if (row.free === null && Number(row.slots) < values.maxInFlight && attempt === 0) {
      await createSlots(sequelize, values.userScope, values.maxInFlight);
      continue;
    }
    if (row.free === null) return { claimed: false, cap: 'in-flight', last };
    if (row.room === false) return { claimed: false, cap: 'retained', last };
    return { claimed: false, cap: null, last };
  }
}

/**
 * Users whose slot rows this process has created or seen: a claim's transaction must not need a
 * second pooled connection to create them (under a full pool that would wait on itself), so they
 * are made before the transaction opens, once per user and process. Bounded: forgotten wholesale
 * past 100,000 users (creating them again is a no-op insert).
 */
export class SlotRows {
  private readonly known = new Set<string>();
  constructor(
    private readonly sequelize: Sequelize,
    private readonly maxInFlight: number,
  ) {}

  async ensure(userScope: string): Promise<void> {
    if (this.known.has(userScope)) return;
    await createSlots(this.sequelize, userScope, this.maxInFlight);
    if (this.known.size >= 100000) this.known.clear();
    this.known.add(userScope);
  }
}

/** How long one attempt of createSlots waits on a row lock, and how many attempts it makes. */
const CREATE_SLOTS_LOCK_MS = 50;
const CREATE_SLOTS_ATTEMPTS = 5;

/**
 * The user's slot rows 1..cap, committed at once (outside the claim's transaction). Only the rows
 * missing from the statement's snapshot are inserted: inserting over an existing row that a running
 * claim has updated would wait for that claim's transaction (the unique check waits on its new
 * version), up to the wait bound, and answer 503. The snapshot can still miss rows another instance
 * committed a moment earlier, while a claim already holds one of them (a new user's first burst over
 * several instances: CI saw one such 503 in a burst of 30). So an attempt waits at most 50 ms on a
 * lock, and the next attempt, with a newer snapshot, skips the rows that now exist. After the last
 * attempt it gives up quietly: the claim creates missing rows itself (runClaim, takeSlot).
 */
export async function createSlots(sequelize: Sequelize, userScope: string, cap: number): Promise<void> {
  // SET LOCAL holds for the INSERT: a multi-statement simple query is one implicit transaction.
  const text = `SET LOCAL lock_timeout = '${CREATE_SLOTS_LOCK_MS}ms';
    INSERT INTO idempotency_slots (user_scope, slot)
    SELECT ${sqlLiteral(userScope)}::varchar, g FROM generate_series(1, ${Math.floor(cap)}) g
    WHERE NOT EXISTS (SELECT 1 FROM idempotency_slots s WHERE s.user_scope = ${sqlLiteral(userScope)} AND s.slot = g)
    ON CONFLICT DO NOTHING`;
  for (let attempt = 1; ; attempt++) {
    try {
      await sequelize.query(text);
      return;
    } catch (err) {
      if (!isLockNotAvailable(err)) throw err;
      if (attempt >= CREATE_SLOTS_ATTEMPTS) return;
    }
  }
}

/**
 * A resume turns a FAILED_RETRYABLE record back into PROCESSING: it takes a free slot like a claim
 * (same transaction), as holder. false: the user is at the in-flight cap.
 */
export async function takeSlot(
  sequelize: Sequelize,
  t: Transaction,
  userScope: string,
  scopeKey: string,
  maxInFlight: number,
): Promise<boolean> {
  for (let attempt = 0; attempt < 2; attempt++) {
    const rows = await sequelize.query<{ slot: number }>(
      `WITH free AS (
         SELECT s.slot FROM idempotency_slots s
         WHERE s.user_scope = $1 AND s.slot <= $2
           AND ${SLOT_IS_FREE}
         ORDER BY s.slot LIMIT 1 FOR UPDATE SKIP LOCKED)
       UPDATE idempotency_slots s SET holder = $3 FROM free WHERE s.user_scope = $1 AND s.slot = free.slot
       RETURNING s.slot`,
      { bind: [userScope, maxInFlight, scopeKey], transaction: t, type: QueryTypes.SELECT },
    );
    if (rows.length === 1) return true;
    if (attempt === 0) await createSlots(sequelize, userScope, maxInFlight);
  }
  return false;
}

/**
 * Deletes records, leaves their tombstones (kept `tombstoneDays`) and gives their count back to their
 * slots, in one statement. `where` selects the candidates (SQL over idempotency_records r, with
 * $-parameters from `bind`); records whose slot row or key lock another transaction holds are skipped
 * (never waited for) and left for later.
 */
export async function deleteRecords(
  sequelize: Sequelize,
  where: string,
  bind: unknown[],
  limit: number,
  tombstoneDays: number,
): Promise<number> {
  // Without parameters (the purge's batches) the plan settings go in the same round trip: a
  // multi-statement simple query is one implicit transaction, so SET LOCAL holds for the statement.
  const text =
    bind.length === 0
      ? `${DELETE_RECORDS_PLAN}\n${deleteRecordsStatement(where, limit, tombstoneDays)}`
      : deleteRecordsStatement(where, limit, tombstoneDays);
  const rows = await sequelize.query<{ n: string }>(text, { bind, type: QueryTypes.SELECT });
  const row = rows.find((r) => r && 'n' in r);
  return Number(row?.n ?? 0);
}

/**
 * A batch touches at most `limit` slot rows, each found by its primary key. Left to itself the
 * planner hashed the whole slot table twice per batch instead (a sequential scan of every user's
 * slot rows: 6 of 20 ms per 500-row batch at 30k slot rows, growing with the number of users), so
 * the batch's joins are kept to nested loops over the indexes.
 */
export const DELETE_RECORDS_PLAN =
  'SET LOCAL enable_seqscan = off; SET LOCAL enable_hashjoin = off; SET LOCAL enable_mergejoin = off;';

/**
 * The statement of deleteRecords (the benchmark EXPLAINs it). Each candidate is deleted by its
 * `ctid`, the row version it locked (FOR UPDATE: no one else can change it before this statement
 * ends), a TID scan instead of a second primary-key lookup per row: a 500-row batch in 3.0 instead
 * of 5.7 ms of execution (PostgreSQL 15, 200k expired rows).
 *
 * A purged key is never executed again: the record's tombstone is written by the same statement
 * (one transaction: no moment with neither), and only for a record whose key lock (idem_claim's
 * advisory lock) this statement took. A claim holding that lock is skipped and left for a later
 * batch; a claim that comes after waits for this statement's commit and then sees the tombstone
 * (idem_claim checks it after taking the lock). Without the lock a claim could check "no tombstone",
 * this statement delete the record and commit, and the claim's insert then find no row: executed twice.
 */
export function deleteRecordsStatement(where: string, limit: number, tombstoneDays: number): string {
  return `WITH candidates AS MATERIALIZED (
       SELECT r.ctid AS row_id, r.scope_key, r.user_scope, r.slot FROM idempotency_records r
       WHERE ${where} ORDER BY r.expires_at LIMIT ${Math.floor(limit)} FOR UPDATE SKIP LOCKED),
     unclaimed AS MATERIALIZED (
       SELECT c.* FROM candidates c WHERE pg_try_advisory_xact_lock(7648, hashtext(c.scope_key))),
     slots AS (
       SELECT s.user_scope, s.slot FROM idempotency_slots s
       WHERE (s.user_scope, s.slot) IN (SELECT user_scope, slot FROM unclaimed)
       FOR UPDATE SKIP LOCKED),
     gone AS (
       DELETE FROM idempotency_records r USING unclaimed c
       WHERE r.ctid = c.row_id
         AND (c.slot IS NULL OR (c.user_scope, c.slot) IN (SELECT user_scope, slot FROM slots))
       RETURNING c.user_scope, c.slot, r.scope_key, r.request_hash),
     buried AS (
       ${buryStatement('gone', tombstoneDays)}
       RETURNING 1),
     counted AS (
       UPDATE idempotency_slots s SET retained = GREATEST(0, s.retained - g.n)
       FROM (SELECT user_scope, slot, count(*) AS n FROM gone WHERE slot IS NOT NULL GROUP BY 1, 2) g
       WHERE s.user_scope = g.user_scope AND s.slot = g.slot
       RETURNING 1)
     SELECT (SELECT count(*) FROM gone) AS n, (SELECT count(*) FROM counted) AS counted,
            (SELECT count(*) FROM buried) AS buried`;
}

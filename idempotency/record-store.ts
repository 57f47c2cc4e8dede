import type { Sequelize } from 'sequelize';
import { sqlLiteral, sqlRows } from '../core/sql.js';
import type { RecordStatus } from '../models/idempotency-record.js';
import { type ClaimResult, runClaim } from './caps.js';
import type { FoldedTransaction } from './folded-transaction.js';

export interface ClaimRequest {
  scopeKey: string;
  requestHash: string;
  /** The same request's digest under the previous normalisation (fp1): old records still match it. */
  legacyHash?: string;
  /** One digest per body field (fingerprint.ts fieldDigests), kept to name the fields of a 409. */
  fieldHashes?: Record<string, string>;
  userScope: string;
  operation: string;
  ttlHours: number;
}

export interface StoredRecord {
  requestHash: string;
  status: RecordStatus;
  resourceId: string | null;
  responseBody: string | null;
  httpStatus: number | null;
  ownerToken: string | null;
  leaseExpired: boolean;
  /** Milliseconds left on the record's lease (Mode B); null without a lease. */
  leaseLeftMs: number | null;
  /** JSON of the first request's field digests; null for records written before they were kept. */
  fieldHashes: string | null;
  expired: boolean;
}

export interface Limits {
  maxInFlight: number;
  maxRetained: number;
  waitMs: number;
}

/**
 * Mode A claim, sent as one multi-statement round trip that also opens the transaction (a simple
 * query, so the values are escaped literals; every one of them has a restricted alphabet anyway):
 * 0. BEGIN (folded-transaction.ts: the transaction's first statement rides with the claim).
 * 1. `lock_timeout` bounds how long a concurrent duplicate waits on our uncommitted primary key
 *    (the database does the bounded wait; on expiry the duplicate gets 202).
 * 2. The claim of caps.ts: a free in-flight slot (held until this transaction ends), room under
 *    the retained cap, and INSERT ... ON CONFLICT DO NOTHING: exactly one of any number of
 *    concurrent requests inserts. The bound stays for the business write too: a write stuck behind
 *    another transaction's row answers 503 (rolled back, retry with the same key).
 * 3. SAVEPOINT: a final business failure rolls back to here and records FAILED_FINAL instead.
 * 4. `business` (optional): the operation's write as one statement that writes only under
 *    claimedGuard, so it rides in the same round trip (its rows come back as the claim's `after`).
 * 5. `finish` (optional): the record's final state, under claimedGuard too, and COMMIT: the whole
 *    transaction in this one round trip (a create whose answer was known before its write).
 */
export function claimLocal(
  sequelize: Sequelize,
  t: FoldedTransaction,
  req: ClaimRequest,
  limits: Limits,
  business?: string,
  finish?: string,
): Promise<ClaimResult> {
  const timeout = `SET LOCAL lock_timeout = '${Math.max(1, Math.floor(limits.waitMs))}ms';`;
  const after = business ? `SAVEPOINT idem_business;\n${business}` : 'SAVEPOINT idem_business;';
  return runClaim(
    sequelize,
    t,
    {
      scopeKey: req.scopeKey,
      requestHash: req.requestHash,
      userScope: req.userScope,
      operation: req.operation,
      ttlSeconds: req.ttlHours * 3600,
      maxInFlight: limits.maxInFlight,
      maxRetained: limits.maxRetained,
      fieldHashes: req.fieldHashes,
    },
    // With `finish`, every attempt is a whole transaction (BEGIN ... COMMIT); without it, the
    // transaction opens with the first attempt and stays open for the caller.
    finish
      ? { before: `BEGIN;\n${timeout}`, after: `${after}\n${finish}\nCOMMIT;` }
      : { first: 'BEGIN;', before: timeout, after },
  );
}

/**
 * The record's final state and the COMMIT in one round trip (a FAILED_FINAL first rolls the
 * business write back to the claim's savepoint). Values as escaped literals: one simple query.
 * The UPDATE is `idem_finish_local` (migration 20261124000003), so its plan is kept per session.
 */
export async function finishLocal(t: FoldedTransaction, final: FinalState): Promise<void> {
  await t.commitWith(
    `${final.status === 'FAILED_FINAL' ? 'ROLLBACK TO SAVEPOINT idem_business;\n' : ''}${finishStatement(final)}`,
  );
}

/** A Mode A record's final state: its status and the sealed reply (stored-reply.ts) it replays. */
export interface FinalState {
  scopeKey: string;
  status: 'SUCCEEDED' | 'FAILED_FINAL';
  httpStatus: number;
  responseBody: string;
  resourceId: string | null;
}

/**
 * The final state as one literal statement; with `guard`, written only where it holds (the claim's
 * mark, caps.ts claimedGuard: a final state sent in the claim's own round trip).
 */
export function finishStatement(final: FinalState, guard?: string): string {
  const lit = sqlLiteral;
  const { scopeKey, status, httpStatus, responseBody, resourceId } = final;
  const call = `idem_finish_local(${lit(scopeKey)}, ${lit(status)}, ${Math.trunc(httpStatus)}, ${lit(responseBody)}, ${resourceId === null ? 'NULL' : lit(resourceId)})`;
  return guard ? `SELECT ${call} WHERE ${guard};` : `SELECT ${call};`;
}

/**
 * The read of a key's record ($1: the scope key): the replay's one round trip. Its columns are those of
 * `idem_record_view` (migration 20261127000002), the one definition that idem_auth_read and
 * idem_execute read a record through too.
 */
export const READ_RECORD_SQL = 'SELECT * FROM idem_record_view($1)';

export async function readRecord(sequelize: Sequelize, scopeKey: string): Promise<StoredRecord | undefined> {
  const rows = await sqlRows<StoredRecord>(sequelize, READ_RECORD_SQL, [scopeKey]);
  return rows[0];
}

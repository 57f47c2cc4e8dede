import type { Sequelize } from 'sequelize';
import { isDatabaseUnavailable, isLockNotAvailable } from '../core/db-errors.js';
import { sqlRows } from '../core/sql.js';
import type { UserCheck } from '../models/user.js';
import type { Cap } from './caps.js';
import type { ClaimRequest, FinalState, Limits, StoredRecord } from './record-store.js';
import { KEY_EXPIRED_HINT, refusingExpired } from './tombstones.js';

/**
 * A keyed create as one statement: `idem_execute` (migration 20261125000003-keyed-create-at-once.cjs)
 * checks the user row's rule, reads the key's record, claims with the record's final state and runs
 * the business statement, as one transaction of its own. Values are bound parameters (the business
 * statement is one of them, as text).
 */
export const EXECUTE_AT_ONCE_SQL = `SELECT * FROM idem_execute($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13,
  $14, $15, $16, $17, $18)`;

/** What idem_execute decided, in the order it decides. */
export type AtOnceRow =
  /** The user row's rule refused: nothing was read or written; the row (undefined: none) says why. */
  | { kind: 'refused'; user: { status: string | null; role: string | null } }
  /** The key has a record: nothing was written. */
  | { kind: 'found'; record: StoredRecord }
  /** Claimed: the record in its final state and the business row are committed. */
  | { kind: 'claimed' }
  /** Not claimed (a duplicate committed in between, a cap, the user's slot rows missing). */
  | { kind: 'lost'; cap: Cap | null; slotsMissing: boolean };

type Row = {
  userStatus: string | null;
  userRole: string | null;
  refused: boolean;
  claimed: number | null;
  free: number | null;
  slots: number | null;
  room: boolean | null;
} & { [K in keyof StoredRecord]: StoredRecord[K] | null };

export async function executeAtOnce(
  sequelize: Sequelize,
  req: ClaimRequest,
  limits: Limits,
  check: UserCheck,
  final: FinalState,
  business: string,
): Promise<AtOnceRow> {
  // A tombstoned key: idem_claim raised inside the statement, which wrote nothing.
  const [row] = await refusingExpired(() =>
    sqlRows<Row>(sequelize, EXECUTE_AT_ONCE_SQL, [
      check.userId,
      check.tenantId,
      check.tokenRole,
      check.adminOnly,
      req.scopeKey,
      req.requestHash,
      req.userScope,
      req.operation,
      req.ttlHours * 3600,
      Math.floor(limits.maxInFlight),
      Math.floor(limits.maxRetained),
      req.fieldHashes ? JSON.stringify(req.fieldHashes) : null,
      Math.max(1, Math.floor(limits.waitMs)),
      final.status,
      final.httpStatus,
      final.responseBody,
      final.resourceId,
      business,
    ]),
  );
  if (!row) throw new Error('idem_execute returned no row');
  if (row.refused) return { kind: 'refused', user: { status: row.userStatus, role: row.userRole } };
  if (row.requestHash !== null) return { kind: 'found', record: recordOfRow(row) };
  if (row.claimed !== null) return { kind: 'claimed' };
  const slotsMissing = row.free === null && Number(row.slots) < limits.maxInFlight;
  const cap: Cap | null = row.free === null ? 'in-flight' : row.room === false ? 'retained' : null;
  return { kind: 'lost', cap, slotsMissing };
}

/** The HINT idem_claim sets on its wait for the key's advisory lock (migration 20261126000001). */
export const CLAIM_BUSY_HINT = 'idem_claim: key busy';

/** The claim's wait for the key's lock ended by lock_timeout: the key's request is in flight. */
export function isClaimBusy(err: unknown): boolean {
  const e = err as { hint?: unknown } | null;
  return isLockNotAvailable(err) && e?.hint === CLAIM_BUSY_HINT;
}

/**
 * A database error of a claim's round trip (idem_execute's, or claimLocal's claim and business
 * statement) that the business statement raised, decided without the message text (lc_messages may
 * be any language): every SQLSTATE error but the claim's marked wait for the key's lock, and but a
 * lost connection (answered as a failed claim). An error of the claim itself other than that wait is
 * not expected; read as the business statement's, it sends the request to the general path, which
 * runs every step again and decides.
 */
export function businessStatementError(err: unknown): boolean {
  const e = err as { code?: unknown; hint?: unknown } | null;
  if (typeof e?.code !== 'string' || !/^[0-9A-Z]{5}$/.test(e.code)) return false;
  return e.hint !== CLAIM_BUSY_HINT && e.hint !== KEY_EXPIRED_HINT && !isDatabaseUnavailable(err);
}

/** A record's columns as the auth read and idem_execute return them (requestHash and status are NOT NULL in the table). */
export function recordOfRow(r: { [K in keyof StoredRecord]: StoredRecord[K] | null }): StoredRecord {
  return {
    requestHash: r.requestHash ?? '',
    status: r.status ?? 'PROCESSING',
    resourceId: r.resourceId,
    responseBody: r.responseBody,
    httpStatus: r.httpStatus,
    ownerToken: r.ownerToken,
    leaseExpired: r.leaseExpired ?? false,
    leaseLeftMs: r.leaseLeftMs,
    fieldHashes: r.fieldHashes,
    expired: r.expired ?? false,
  };
}

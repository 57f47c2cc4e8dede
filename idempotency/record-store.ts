import { QueryTypes, type Sequelize, type Transaction } from 'sequelize';
import type { RecordStatus } from '../models/idempotency-record.js';
import { inFlightCount, withinCaps } from './caps.js';

export interface ClaimRequest {
  scopeKey: string;
  requestHash: string;
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
  expired: boolean;
}

export interface Limits {
  maxInFlight: number;
  maxRetained: number;
  waitMs: number;
}

/**
 * Mode A claim, sent as one multi-statement round trip inside the caller's transaction (a simple
 * query, so the values are escaped literals; every one of them has a restricted alphabet anyway):
 * 1. `lock_timeout` bounds how long a concurrent duplicate waits on our uncommitted primary key
 *    (the database does the bounded wait; on expiry the duplicate gets 202).
 * 2. INSERT ... ON CONFLICT DO NOTHING: exactly one of any number of concurrent requests inserts.
 *    The caps are part of the same statement (counted in the database, bounded by LIMIT).
 *    The bound stays for the business write too: a write stuck behind another transaction's row
 *    answers 503 (rolled back, retry with the same key) instead of holding a worker indefinitely.
 * 3. SAVEPOINT: a final business failure rolls back to here and records FAILED_FINAL instead.
 * Returns true when this request inserted the record and owns the execution.
 */
export async function claimLocal(
  sequelize: Sequelize,
  t: Transaction,
  req: ClaimRequest,
  limits: Limits,
): Promise<boolean> {
  const lit = (v: string) => sequelize.escape(v);
  const user = lit(req.userScope);
  const sql = `SET LOCAL lock_timeout = '${Math.max(1, Math.floor(limits.waitMs))}ms';
INSERT INTO idempotency_records (scope_key, request_hash, status, user_scope, operation, expires_at)
SELECT ${lit(req.scopeKey)}, ${lit(req.requestHash)}, 'PROCESSING', ${user}, ${lit(req.operation)},
       now() + make_interval(secs => ${Number(req.ttlHours) * 3600})
WHERE ${withinCaps(user, String(limits.maxRetained), String(limits.maxInFlight))}
ON CONFLICT (scope_key) DO NOTHING
RETURNING 1;
SAVEPOINT idem_business;`;
  // The rows of all three statements together: only the INSERT's RETURNING can produce one.
  const inserted = await sequelize.query(sql, { transaction: t, type: QueryTypes.SELECT });
  return inserted.length === 1;
}

export async function finishLocal(
  sequelize: Sequelize,
  t: Transaction,
  scopeKey: string,
  status: 'SUCCEEDED' | 'FAILED_FINAL',
  httpStatus: number,
  responseBody: string,
  resourceId: string | null,
): Promise<void> {
  if (status === 'FAILED_FINAL')
    await sequelize.query('ROLLBACK TO SAVEPOINT idem_business', { transaction: t });
  await sequelize.query(
    `UPDATE idempotency_records SET status = $2, http_status = $3, response_body = $4, resource_id = $5, updated_at = now()
     WHERE scope_key = $1`,
    { bind: [scopeKey, status, httpStatus, responseBody, resourceId], transaction: t },
  );
}

export async function readRecord(sequelize: Sequelize, scopeKey: string): Promise<StoredRecord | undefined> {
  const rows = await sequelize.query<StoredRecord>(
    `SELECT request_hash AS "requestHash", status, resource_id AS "resourceId", response_body AS "responseBody",
            http_status AS "httpStatus", owner_token AS "ownerToken",
            (lease_until IS NOT NULL AND lease_until < now()) AS "leaseExpired", (expires_at < now()) AS expired
     FROM idempotency_records WHERE scope_key = $1`,
    { bind: [scopeKey], type: QueryTypes.SELECT },
  );
  return rows[0];
}

/** An expired record is forgotten: the key may be used afresh (business unique keys still hold). */
export async function deleteExpired(sequelize: Sequelize, scopeKey: string): Promise<void> {
  await sequelize.query(
    `DELETE FROM idempotency_records WHERE scope_key = $1 AND expires_at < now() AND status <> 'PROCESSING'`,
    { bind: [scopeKey] },
  );
}

/** Which cap refused an insert that found no conflicting record. */
export async function capExceeded(
  sequelize: Sequelize,
  userScope: string,
  limits: Limits,
): Promise<'in-flight' | 'retained'> {
  const rows = await sequelize.query<{ processing: string }>(
    `SELECT ${inFlightCount('$1', '$2')} AS processing`,
    {
      bind: [userScope, limits.maxInFlight],
      type: QueryTypes.SELECT,
    },
  );
  return Number(rows[0]?.processing ?? 0) >= limits.maxInFlight ? 'in-flight' : 'retained';
}

import type { ClientBase } from 'pg';
import { QueryTypes, type Sequelize, type Transaction } from 'sequelize';
import type { RecordStatus } from '../models/idempotency-record.js';

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

/** The pg client a Sequelize transaction runs on (so engine SQL and business writes share it). */
export function clientOf(t: Transaction): ClientBase {
  return (t as unknown as { connection: ClientBase }).connection;
}

const lit = (client: ClientBase, v: string) => client.escapeLiteral(v);

/**
 * Mode A claim, sent as one multi-statement round trip inside the caller's transaction:
 * 1. `lock_timeout` bounds how long a concurrent duplicate waits on our uncommitted primary key
 *    (the database does the bounded wait; on expiry the duplicate gets 202).
 * 2. INSERT ... ON CONFLICT DO NOTHING: exactly one of any number of concurrent requests inserts.
 *    The caps are part of the same statement (counted in the database, bounded by LIMIT).
 *    The bound stays for the business write too: a write stuck behind another transaction's row
 *    answers 503 (rolled back, retry with the same key) instead of holding a worker indefinitely.
 * 3. SAVEPOINT: a final business failure rolls back to here and records FAILED_FINAL instead.
 * Returns true when this request inserted the record and owns the execution.
 */
export async function claimLocal(t: Transaction, req: ClaimRequest, limits: Limits): Promise<boolean> {
  const c = clientOf(t);
  const user = lit(c, req.userScope);
  const sql = `SET LOCAL lock_timeout = '${Math.max(1, Math.floor(limits.waitMs))}ms';
INSERT INTO idempotency_records (scope_key, request_hash, status, user_scope, operation, expires_at)
SELECT ${lit(c, req.scopeKey)}, ${lit(c, req.requestHash)}, 'PROCESSING', ${user}, ${lit(c, req.operation)},
       now() + make_interval(secs => ${Number(req.ttlHours) * 3600})
WHERE (SELECT count(*) FROM (SELECT 1 FROM idempotency_records WHERE user_scope = ${user} AND expires_at > now()
        LIMIT ${limits.maxRetained}) r) < ${limits.maxRetained}
  AND (SELECT count(*) FROM (SELECT 1 FROM idempotency_records WHERE user_scope = ${user} AND status = 'PROCESSING'
        LIMIT ${limits.maxInFlight}) p) < ${limits.maxInFlight}
ON CONFLICT (scope_key) DO NOTHING
RETURNING 1;
SAVEPOINT idem_business;`;
  const results = (await c.query(sql)) as unknown as Array<{ rowCount: number | null }>;
  return (results[1]?.rowCount ?? 0) === 1;
}

export async function finishLocal(
  t: Transaction,
  scopeKey: string,
  status: 'SUCCEEDED' | 'FAILED_FINAL',
  httpStatus: number,
  responseBody: string,
  resourceId: string | null,
): Promise<void> {
  const c = clientOf(t);
  if (status === 'FAILED_FINAL') await c.query('ROLLBACK TO SAVEPOINT idem_business');
  await c.query(
    `UPDATE idempotency_records SET status = $2, http_status = $3, response_body = $4, resource_id = $5, updated_at = now()
     WHERE scope_key = $1`,
    [scopeKey, status, httpStatus, responseBody, resourceId],
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
    `SELECT count(*) AS processing FROM (SELECT 1 FROM idempotency_records WHERE user_scope = $1 AND status = 'PROCESSING'
       LIMIT $2) p`,
    { bind: [userScope, limits.maxInFlight], type: QueryTypes.SELECT },
  );
  return Number(rows[0]?.processing ?? 0) >= limits.maxInFlight ? 'in-flight' : 'retained';
}

import { randomBytes } from 'node:crypto';
import { QueryTypes, type Sequelize, type Transaction } from 'sequelize';
import { type ClaimRequest, clientOf, type Limits } from './record-store.js';

/**
 * Mode B: the record is committed as PROCESSING before the external call, owned by an unguessable
 * owner_token until lease_until. Every later write is conditional on the owner token (fencing):
 * an executor whose lease was taken over can never write a final state.
 */
export function newOwnerToken(): string {
  return randomBytes(32).toString('hex');
}

/** Inserts the PROCESSING record with a lease, inside the caller's transaction (Tx 1). */
export async function claimWithLease(
  t: Transaction,
  req: ClaimRequest,
  owner: string,
  leaseMs: number,
  limits: Limits,
): Promise<boolean> {
  const c = clientOf(t);
  const res = await c.query(
    `INSERT INTO idempotency_records (scope_key, request_hash, status, user_scope, operation, expires_at, owner_token, lease_until)
     SELECT $1::varchar, $2::varchar, 'PROCESSING', $3::varchar, $4::varchar, now() + make_interval(secs => $5::float8),
            $6::varchar, now() + make_interval(secs => $7::float8)
     WHERE (SELECT count(*) FROM (SELECT 1 FROM idempotency_records WHERE user_scope = $3::varchar AND expires_at > now()
              LIMIT $8::int) r) < $8::int
       AND (SELECT count(*) FROM (SELECT 1 FROM idempotency_records WHERE user_scope = $3::varchar AND status = 'PROCESSING'
              LIMIT $9::int) p) < $9::int
     ON CONFLICT (scope_key) DO NOTHING RETURNING 1`,
    [
      req.scopeKey,
      req.requestHash,
      req.userScope,
      req.operation,
      req.ttlHours * 3600,
      owner,
      leaseMs / 1000,
      limits.maxRetained,
      limits.maxInFlight,
    ],
  );
  return res.rowCount === 1;
}

export async function setResourceId(
  t: Transaction,
  scopeKey: string,
  owner: string,
  resourceId: string,
): Promise<void> {
  await clientOf(t).query(
    'UPDATE idempotency_records SET resource_id = $3 WHERE scope_key = $1 AND owner_token = $2',
    [scopeKey, owner, resourceId],
  );
}

/**
 * Takeover with exactly one winner: the condition names the previous owner and requires its lease
 * to have ended (or the record to be FAILED_RETRYABLE, which has no owner). Returns the new owner
 * token, or undefined when someone else won or the record moved on.
 */
export async function takeOver(
  sequelize: Sequelize,
  scopeKey: string,
  previousOwner: string | null,
  leaseMs: number,
) {
  const owner = newOwnerToken();
  const [, count] = await sequelize.query(
    `UPDATE idempotency_records SET owner_token = $2, lease_until = now() + make_interval(secs => $3::float8),
            status = 'PROCESSING', updated_at = now()
     WHERE scope_key = $1 AND owner_token IS NOT DISTINCT FROM $4
       AND ((status = 'PROCESSING' AND lease_until < now()) OR status = 'FAILED_RETRYABLE')`,
    { bind: [scopeKey, owner, leaseMs / 1000, previousOwner], type: QueryTypes.UPDATE },
  );
  return count === 1 ? owner : undefined;
}

/** Tx 2: the final state, only if we still own the lease. false = fenced off (roll back). */
export async function finishFenced(
  t: Transaction,
  scopeKey: string,
  owner: string,
  status: 'SUCCEEDED' | 'FAILED_FINAL',
  httpStatus: number,
  responseBody: string,
): Promise<boolean> {
  const res = await clientOf(t).query(
    `UPDATE idempotency_records SET status = $3, http_status = $4, response_body = $5, owner_token = NULL,
            lease_until = NULL, updated_at = now()
     WHERE scope_key = $1 AND owner_token = $2 AND status = 'PROCESSING'`,
    [scopeKey, owner, status, httpStatus, responseBody],
  );
  return res.rowCount === 1;
}

/** Certainly not executed downstream (refused, 5xx): a retry with the same key may execute again. */
export async function markRetryable(sequelize: Sequelize, scopeKey: string, owner: string): Promise<void> {
  await sequelize.query(
    `UPDATE idempotency_records SET status = 'FAILED_RETRYABLE', owner_token = NULL, lease_until = NULL, updated_at = now()
     WHERE scope_key = $1 AND owner_token = $2 AND status = 'PROCESSING'`,
    { bind: [scopeKey, owner] },
  );
}

/**
 * Outcome still unknown and we stop working on it: end our lease now (the record stays PROCESSING)
 * so that the next retry or the recoverer can take over at once, query first, and finish.
 */
export async function releaseLease(sequelize: Sequelize, scopeKey: string, owner: string): Promise<void> {
  await sequelize.query(
    `UPDATE idempotency_records SET lease_until = now() - interval '1 millisecond', updated_at = now()
     WHERE scope_key = $1 AND owner_token = $2 AND status = 'PROCESSING'`,
    { bind: [scopeKey, owner] },
  );
}

export interface ExpiredLease {
  scopeKey: string;
  ownerToken: string | null;
  resourceId: string | null;
}

export async function findExpiredLeases(
  sequelize: Sequelize,
  operation: string,
  limit: number,
): Promise<ExpiredLease[]> {
  return sequelize.query<ExpiredLease>(
    `SELECT scope_key AS "scopeKey", owner_token AS "ownerToken", resource_id AS "resourceId" FROM idempotency_records
     WHERE status = 'PROCESSING' AND lease_until < now() AND operation = $1 ORDER BY lease_until LIMIT $2`,
    { bind: [operation, limit], type: QueryTypes.SELECT },
  );
}

import { QueryTypes, type Sequelize } from 'sequelize';
import { READ_RECORD_SQL, type StoredRecord } from '../../idempotency/record-store.js';
import type { User } from '../../models/user.js';
import type { Identity } from './jwt.js';

/** The token's user row, when it has one: its status and role win over the token's. */
export type UserRow = { status: User['status']; role: User['role'] } | undefined;

/** The record of the request's idempotency scope, read with the user row (undefined: none there). */
export interface Prefetched {
  scopeKey: string;
  record: StoredRecord | undefined;
}

type Joined = { userStatus: User['status'] | null; userRole: User['role'] | null } & {
  [K in keyof StoredRecord]: StoredRecord[K] | null;
};

/**
 * The auth lookup of every authenticated request; with an idempotency scope, the key's record in the
 * same round trip (the engine's read-first fast path: a replay is then answered from this one read).
 */
export async function readUser(
  sequelize: Sequelize,
  identity: Identity,
  scopeKey?: string,
): Promise<{ row: UserRow; prefetched?: Prefetched }> {
  if (!scopeKey) {
    const [row] = await sequelize.query<NonNullable<UserRow>>(
      'SELECT status, role FROM users WHERE id = $1 AND tenant_id = $2',
      { bind: [identity.userId, identity.tenantId], type: QueryTypes.SELECT },
    );
    return { row };
  }
  const [joined] = await sequelize.query<Joined>(
    `SELECT u.status AS "userStatus", u.role AS "userRole", r.*
     FROM (SELECT 1) AS one
     LEFT JOIN users u ON u.id = $2 AND u.tenant_id = $3
     LEFT JOIN LATERAL (${READ_RECORD_SQL}) r ON true`,
    { bind: [scopeKey, identity.userId, identity.tenantId], type: QueryTypes.SELECT },
  );
  const { userStatus, userRole, ...record } = joined;
  const row = userStatus && userRole ? { status: userStatus, role: userRole } : undefined;
  const found = record.requestHash === null ? undefined : storedRecord(record);
  return { row, prefetched: { scopeKey, record: found } };
}

/** The joined row's record columns, present (requestHash and status are NOT NULL in the table). */
function storedRecord(r: Omit<Joined, 'userStatus' | 'userRole'>): StoredRecord {
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

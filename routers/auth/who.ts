import type { Sequelize } from 'sequelize';
import { Forbidden, NotFound } from '../../core/errors.js';
import { type Allocated, sqlRows } from '../../core/sql.js';
import { recordOfRow } from '../../idempotency/at-once.js';
import type { StoredRecord } from '../../idempotency/record-store.js';
import type { User, UserCheck } from '../../models/user.js';
import type { Identity } from './jwt.js';

/** The token's user row, when it has one: its status and role win over the token's. */
export type UserRow = { status: User['status']; role: User['role'] } | undefined;

/** The record of the request's idempotency scope, read with the user row (undefined: none there). */
export interface Prefetched {
  scopeKey: string;
  record: StoredRecord | undefined;
  /** A keyed create's new id and time, allocated by the same read when the key had no record. */
  allocated?: Allocated;
}

type Joined = { userStatus: User['status'] | null; userRole: User['role'] | null } & {
  [K in keyof StoredRecord]: StoredRecord[K] | null;
} & { newId?: string | null; newAt?: Date | null };

/**
 * The auth lookup of every authenticated request; with an idempotency scope, the key's record in the
 * same round trip (the engine's read-first fast path: a replay is then answered from this one read).
 * One call of `idem_auth_read` (migration 20261124000001-hot-path-functions.cjs: PL/pgSQL, so its
 * plan is kept per connection; the same join sent as text was planned on every request, five times
 * the cost of running it). Its record columns are idem_record_view's, as READ_RECORD_SQL's are.
 */
export async function readUser(
  sequelize: Sequelize,
  identity: Identity,
  scopeKey?: string,
  idSequence?: string,
): Promise<{ row: UserRow; prefetched?: Prefetched }> {
  const params = [identity.userId, identity.tenantId, scopeKey ?? null];
  // A keyed create also takes its new row's id and time when the key has no record
  // (idem_auth_read_allocating, migration 20261125000002): its answer is known before the write.
  const [joined] =
    scopeKey && idSequence
      ? await sqlRows<Joined>(sequelize, 'SELECT * FROM idem_auth_read_allocating($1, $2, $3, $4)', [
          ...params,
          idSequence,
        ])
      : await sqlRows<Joined>(sequelize, 'SELECT * FROM idem_auth_read($1, $2, $3)', params);
  const { userStatus, userRole, newId, newAt, ...record } = joined;
  const row = userRowOf({ status: userStatus, role: userRole });
  if (!scopeKey) return { row };
  const found = record.requestHash === null ? undefined : recordOfRow(record);
  // The time from the service's clock, as every create's (models/timestamps.ts), not the read's.
  const allocated = newId && newAt ? { id: newId, at: new Date() } : undefined;
  return { row, prefetched: { scopeKey, record: found, ...(allocated ? { allocated } : {}) } };
}

/** The user row's rule columns as a read returns them (null: no row of that user in the tenant). */
export function userRowOf(user: { status: string | null; role: string | null }): UserRow {
  return user.status && user.role
    ? { status: user.status as User['status'], role: user.role as User['role'] }
    : undefined;
}

/**
 * A tenant's resource as a reader may see it (CONTRACT section 4), the row read by tenant and id: none
 * (no such id, or another tenant's, whose existence is not revealed) is 404 "<What> not found";
 * another user's, for a caller who is not an admin, 403 "Not your <what>".
 */
export function visibleTo<R extends { userId: unknown }>(
  identity: Identity,
  row: R | null | undefined,
  what: string,
): R {
  if (!row) throw new NotFound(`${what[0].toUpperCase()}${what.slice(1)} not found`);
  if (identity.role !== 'admin' && String(row.userId) !== identity.userId)
    throw new Forbidden(`Not your ${what}`);
  return row;
}

/** Refuses any role but admin (403). */
export function requireAdminRole(identity: Identity): void {
  if (identity.role !== 'admin') throw new Forbidden('Admin role required');
}

/**
 * The rule the user row sets for a request: a DISABLED user is refused (403, ranked with 401 by
 * CONTRACT section 3), and the row's role wins over the token's (a demotion takes effect before the
 * token expires). The identity to act as.
 */
export function admittedAs(identity: Identity, row: UserRow): Identity {
  if (row?.status === 'DISABLED') throw new Forbidden('User is disabled');
  return row ? { ...identity, role: row.role } : identity;
}

/**
 * The whole user-row rule: admittedAs, then, for an admin-only write, the admin role. Its SQL twin,
 * for writes that check it in their own statement, is idem_user_admits (migration 20261126000002);
 * test/rules/user-row-rule.test.ts holds the two to the same answer in every case.
 */
export function admitted(identity: Identity, row: UserRow, adminOnly: boolean): Identity {
  const auth = admittedAs(identity, row);
  if (adminOnly) requireAdminRole(auth);
  return auth;
}

/**
 * The same rule (and the admin role when `admin`) for a write to check in its own statement
 * (models/user.ts User.insertChecked, migration 20261125000001): a keyless create then needs no read
 * before it (one round trip instead of two), and a user disabled while the request was in flight is
 * refused by the statement itself. The statement writes into the identity's tenant, whose row it reads.
 */
export function userCheck(identity: Identity, admin: boolean): UserCheck {
  return { tenantId: identity.tenantId, userId: identity.userId, tokenRole: identity.role, adminOnly: admin };
}

/**
 * After a write whose `userCheck` refused: reads the row and throws the 403 it means
 * (disabled, or not an admin). Returns the identity when the row admits the request now (it changed
 * in between): the caller may then run the write as a request read first would.
 */
export async function refusedBecause(
  sequelize: Sequelize,
  identity: Identity,
  admin: boolean,
): Promise<Identity> {
  const { row } = await readUser(sequelize, identity);
  return admitted(identity, row, admin);
}

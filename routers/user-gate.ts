import { sqlLiteral } from '../core/sql.js';
import type { Gate } from '../idempotency/effect.js';
import type { Identity } from './auth/jwt.js';
import { admitted, readUser, userRowOf } from './auth/who.js';
import type { AuthedContext } from './context.js';

/**
 * The user-row rule (routers/auth/who.ts `admitted`) as the gate of an effect's claim
 * (idempotency/effect.ts Gate): when authentication read nothing (the definition's
 * `checksUserInClaim`, meta `userCheckInWrite`), the row is read at the end of Tx 1's claim round
 * trip instead of in a round trip of its own before it, and a refusal (DISABLED; not an admin for
 * an admin-only write) still comes before anything the claim found, rolling its transaction back.
 * The row's role replaces the token's in the request's `auth`. undefined: authentication read the
 * row already.
 */
export function userRowGate<In extends { auth: Identity }>(
  ctx: AuthedContext,
  adminOnly: boolean,
): Gate<In> | undefined {
  if (!ctx.userCheckInWrite) return undefined;
  const identity = ctx.auth;
  const { sequelize } = ctx.services;
  return {
    // idem_auth_read without a scope key: the user row's two columns (no row: both null).
    statement: `SELECT "userStatus" AS status, "userRole" AS role FROM idem_auth_read(${sqlLiteral(identity.userId)}, ${sqlLiteral(identity.tenantId)}, NULL);`,
    admit: (rows, request) => {
      const row = (rows[0] ?? {}) as { status?: string | null; role?: string | null };
      const user = userRowOf({ status: row.status ?? null, role: row.role ?? null });
      return { ...request, auth: admitted(identity, user, adminOnly) };
    },
    admitAlone: async (request) => {
      const { row } = await readUser(sequelize, identity);
      return { ...request, auth: admitted(identity, row, adminOnly) };
    },
  };
}

import type { Sequelize, Transaction } from 'sequelize';
import { sqlRows } from '../core/sql.js';
import { newOwnerToken } from './lease.js';

/**
 * A lease on a resource row that long-running background work holds (an export), the same protocol as
 * an idempotency record's lease (lease.ts): the row is taken with a conditional UPDATE that only an
 * expired (or never taken) lease lets through, under a fresh unguessable owner token, so that among
 * any number of workers on any number of instances one wins; every later write of the work names that
 * token (`fenced`), so a worker whose lease was taken over (a frozen or partitioned one that comes
 * back) changes nothing and stops. The table has `id`, `status` ('PROCESSING' while the work runs),
 * `lease_owner`, `lease_until` and `updated_at`.
 */
export interface RowLease {
  table: string;
  id: string;
  owner: string;
  leaseMs: number;
}

const TABLE = /^[a-z_][a-z0-9_]*$/;

/** Takes the row's lease when it is free (never taken, or expired); undefined when someone holds it. */
export async function takeRowLease(
  sequelize: Sequelize,
  table: string,
  id: string,
  leaseMs: number,
): Promise<RowLease | undefined> {
  if (!TABLE.test(table)) throw new Error(`not a table name: ${table}`);
  const owner = newOwnerToken();
  const rows = await sqlRows(
    sequelize,
    `UPDATE ${table} SET lease_owner = $2, lease_until = now() + make_interval(secs => $3::float8), updated_at = now()
      WHERE id = $1 AND status = 'PROCESSING' AND (lease_until IS NULL OR lease_until < now())
      RETURNING id`,
    [id, owner, leaseMs / 1000],
  );
  return rows.length === 1 ? { table, id, owner, leaseMs } : undefined;
}

/**
 * A write fenced on the lease: `set` (SQL assignments, `$1`.. for `values`) is applied, the lease
 * renewed, only while this owner holds the row. Returns the updated row's `returning` columns, or
 * undefined when the lease was taken over (nothing was written).
 */
export async function fencedUpdate<R extends Record<string, unknown>>(
  sequelize: Sequelize,
  lease: RowLease,
  set: string,
  values: readonly unknown[],
  returning = 'id',
  transaction?: Transaction,
): Promise<R | undefined> {
  const n = values.length;
  const rows = await sqlRows<R>(
    sequelize,
    `UPDATE ${lease.table} SET ${set}, lease_until = now() + make_interval(secs => $${n + 3}::float8), updated_at = now()
      WHERE id = $${n + 1} AND lease_owner = $${n + 2} AND status = 'PROCESSING'
      RETURNING ${returning}`,
    [...values, lease.id, lease.owner, lease.leaseMs / 1000],
    transaction,
  );
  return rows[0];
}

/** Gives the lease up at once (a graceful stop), so another worker continues without waiting for it. */
export async function releaseRowLease(sequelize: Sequelize, lease: RowLease): Promise<void> {
  await sqlRows(
    sequelize,
    `UPDATE ${lease.table} SET lease_until = now() - interval '1 millisecond', updated_at = now()
      WHERE id = $1 AND lease_owner = $2 AND status = 'PROCESSING'`,
    [lease.id, lease.owner],
  );
}

import type { Sequelize } from 'sequelize';
import { failpoint } from '../../core/failpoints.js';
import { sqlRows } from '../../core/sql.js';
import { fencedUpdate, type RowLease, releaseRowLease, takeRowLease } from '../../idempotency/row-lease.js';
import { countUpTo, csvHeader, type ExportScope, nextBatch, renderRows } from './export-render.js';
import type { ExportFormat, ExportResource } from './exports.schema.js';

/**
 * Rows per part: one part is one batch read, one rendered chunk in memory, one row of export_parts.
 * 1,000 rows make a part of about 100 KB, under V8's large-object size, so a batch's strings die young
 * (5,000 rows measured: the peak RSS of a 1,000,000-row export and download 193 MB, against 172 MB
 * with 1,000, at the same speed; docs/DECISIONS.md).
 */
export const EXPORT_PART_ROWS = 1000;

export interface ExportWork {
  sequelize: Sequelize;
  /** The worker's lease (IDEMPOTENCY_LEASE_MS): renewed with every part it writes. */
  leaseMs: number;
  maxRows: number;
  ttlHours: number;
  partRows?: number;
}

/** How a run ended: finished (either way), someone else holds it, fenced off meanwhile, or stopped. */
export type ExportRunResult = 'succeeded' | 'failed' | 'busy' | 'fenced' | 'stopped';

interface Checkpoint {
  lastId: string | null;
  partsWritten: number;
}

interface Taken extends ExportScope, Checkpoint {}

async function readTaken(sequelize: Sequelize, lease: RowLease): Promise<Taken | undefined> {
  const [row] = await sqlRows<{
    resource: ExportResource;
    format: ExportFormat;
    tenantId: string;
    userId: string;
    allUsers: boolean;
    createdFrom: Date | null;
    createdTo: Date | null;
    snapshotAt: Date;
    lastId: string | null;
    partsWritten: number;
  }>(
    sequelize,
    `SELECT resource, format, tenant_id AS "tenantId", user_id::text AS "userId", all_users AS "allUsers",
            created_from AS "createdFrom", created_to AS "createdTo", snapshot_at AS "snapshotAt",
            last_id AS "lastId", parts_written AS "partsWritten"
       FROM exports WHERE id = $1 AND lease_owner = $2 AND status = 'PROCESSING'`,
    [lease.id, lease.owner],
  );
  return row && { ...row, userId: row.allUsers ? null : row.userId };
}

/**
 * Writes one part and the checkpoint after it in one transaction, fenced on the owner token: the
 * checkpoint's UPDATE names the owner, and the part is inserted only when it matched. A worker whose
 * lease was taken over writes nothing (false) and stops; its successor continues from the last
 * committed part, so every row is in the file exactly once.
 */
async function writePart(
  sequelize: Sequelize,
  lease: RowLease,
  at: Checkpoint,
  part: { data: string; rows: number; lastId: string | null },
): Promise<boolean> {
  return sequelize.transaction(async (t) => {
    const moved = await fencedUpdate<{ partNo: number }>(
      sequelize,
      lease,
      `parts_written = parts_written + 1, last_id = coalesce($1, last_id), rows_written = rows_written + $2,
       bytes_written = bytes_written + $3`,
      [part.lastId, part.rows, Buffer.byteLength(part.data)],
      // The checkpoint it moved from must be the one this worker read: a second guard beside the owner.
      `parts_written AS "partNo"`,
      t,
    );
    if (!moved || moved.partNo !== at.partsWritten + 1) {
      if (moved) throw new Error(`export ${lease.id}: checkpoint moved under its owner`);
      return false;
    }
    await sqlRows(
      sequelize,
      'INSERT INTO export_parts (export_id, part_no, data, rows, last_id) VALUES ($1, $2, $3, $4, $5)',
      [lease.id, moved.partNo, part.data, part.rows, part.lastId],
      t,
    );
    return true;
  });
}

/** The final state, fenced like a part: SUCCEEDED with its figures and expiry, or FAILED with why. */
async function finish(
  work: ExportWork,
  lease: RowLease,
  outcome: { status: 'SUCCEEDED' } | { status: 'FAILED'; reason: string },
): Promise<boolean> {
  const done =
    outcome.status === 'SUCCEEDED'
      ? await fencedUpdate(
          work.sequelize,
          lease,
          `status = 'SUCCEEDED', row_count = rows_written, bytes = bytes_written, completed_at = now(),
           expires_at = now() + make_interval(secs => $1::float8), lease_owner = NULL`,
          [work.ttlHours * 3600],
        )
      : await fencedUpdate(
          work.sequelize,
          lease,
          `status = 'FAILED', failure_reason = $1, completed_at = now(), lease_owner = NULL`,
          [outcome.reason],
        );
  return done !== undefined;
}

/**
 * Runs (or continues) one export: takes its lease, counts its rows once (TOO_MANY_ROWS), then writes
 * it part by part after its checkpoint until no row is left, and finishes it. Memory holds one part.
 * Safe on any number of workers at once: one holds the lease, the others return 'busy'.
 */
export async function runExport(
  work: ExportWork,
  id: string,
  signal?: AbortSignal,
): Promise<ExportRunResult> {
  const { sequelize } = work;
  const lease = await takeRowLease(sequelize, 'exports', id, work.leaseMs);
  if (!lease) return 'busy';
  const taken = await readTaken(sequelize, lease);
  if (!taken) return 'fenced';
  const at: Checkpoint = { lastId: taken.lastId, partsWritten: taken.partsWritten };
  if (at.partsWritten === 0 && (await countUpTo(sequelize, taken, work.maxRows)) > work.maxRows) {
    return (await finish(work, lease, { status: 'FAILED', reason: 'TOO_MANY_ROWS' })) ? 'failed' : 'fenced';
  }
  const partRows = work.partRows ?? EXPORT_PART_ROWS;
  for (;;) {
    if (signal?.aborted) {
      await releaseRowLease(sequelize, lease);
      return 'stopped';
    }
    const { dtos, lastId } = await nextBatch(sequelize, taken, at.lastId, partRows);
    // The CSV header opens the first part (alone when there is no row at all).
    const header = at.partsWritten === 0 && taken.format === 'csv' ? csvHeader(taken.resource) : '';
    if (dtos.length === 0 && !header) break;
    const data = header + renderRows(taken.resource, taken.format, dtos);
    if (!(await writePart(sequelize, lease, at, { data, rows: dtos.length, lastId }))) return 'fenced';
    at.partsWritten += 1;
    at.lastId = lastId ?? at.lastId;
    await failpoint('export.part.after');
    if (dtos.length === 0) break;
  }
  return (await finish(work, lease, { status: 'SUCCEEDED' })) ? 'succeeded' : 'fenced';
}

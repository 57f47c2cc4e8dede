import type { Sequelize } from 'sequelize';
import { sqlRows } from '../../core/sql.js';
import {
  type BackgroundDeps,
  type BackgroundResult,
  defineBackgroundEffect,
  runBackground,
} from '../../idempotency/effect-background.js';
import type { RowLease } from '../../idempotency/row-lease.js';
import { countUpTo, csvHeader, type ExportScope, nextBatch, renderRows } from './export-render.js';
import type { ExportFormat, ExportResource } from './exports.schema.js';

/**
 * Rows per part: one part is one batch read, one rendered chunk in memory, one row of export_parts.
 * 1,000 rows make a part of about 100 KB, under V8's large-object size, so a batch's strings die young
 * (5,000 rows measured: the peak RSS of a 1,000,000-row export and download 193 MB, against 172 MB
 * with 1,000, at the same speed; docs/DECISIONS.md).
 */
export const EXPORT_PART_ROWS = 1000;

export interface ExportWork extends BackgroundDeps {
  maxRows: number;
  ttlHours: number;
  partRows?: number;
}

/** An export as its worker reads it under the lease: what it selects, and its checkpoint. */
interface Taken extends ExportScope {
  id: string;
  lastId: string | null;
  partsWritten: number;
}

async function readTaken(sequelize: Sequelize, lease: RowLease): Promise<Taken | undefined> {
  const [row] = await sqlRows<{
    resource: ExportResource;
    format: ExportFormat;
    tenantId: string;
    userId: string;
    allUsers: boolean;
    createdFrom: string | null;
    createdTo: string | null;
    snapshotAt: string;
    lastId: string | null;
    partsWritten: number;
  }>(
    sequelize,
    `SELECT resource, format, tenant_id AS "tenantId", user_id::text AS "userId", all_users AS "allUsers",
            created_from::text AS "createdFrom", created_to::text AS "createdTo", snapshot_at::text AS "snapshotAt",
            last_id AS "lastId", parts_written AS "partsWritten"
       FROM exports WHERE id = $1 AND lease_owner = $2 AND status = 'PROCESSING'`,
    [lease.id, lease.owner],
  );
  return row && { ...row, id: lease.id, userId: row.allUsers ? null : row.userId };
}

/**
 * An export on the effect mechanism (idempotency/effect-background.ts): its rows counted once before
 * the first part (TOO_MANY_ROWS), then 1,000 rows a part in id order after the checkpoint (`last_id`),
 * each part a row of export_parts; SUCCEEDED with its figures and expiry.
 */
export const exportEffect = defineBackgroundEffect<ExportWork, Taken>({
  name: 'export-run',
  table: 'exports',
  failpoints: { 'part.after': 'export.part.after' },
  read: (work, lease) => readTaken(work.sequelize, lease),
  refusal: async (work, taken) =>
    (await countUpTo(work.sequelize, taken, work.maxRows)) > work.maxRows ? 'TOO_MANY_ROWS' : undefined,
  async nextPart(work, taken) {
    const { dtos, lastId } = await nextBatch(
      work.sequelize,
      taken,
      taken.lastId,
      work.partRows ?? EXPORT_PART_ROWS,
    );
    // The CSV header opens the first part (alone when there is no row at all).
    const header = taken.partsWritten === 0 && taken.format === 'csv' ? csvHeader(taken.resource) : '';
    if (dtos.length === 0 && !header) return undefined;
    const data = header + renderRows(taken.resource, taken.format, dtos);
    return {
      checkpoint: `last_id = coalesce($1, last_id), rows_written = rows_written + $2, bytes_written = bytes_written + $3`,
      values: [lastId, dtos.length, Buffer.byteLength(data)],
      save: (t, partNo) =>
        sqlRows(
          work.sequelize,
          'INSERT INTO export_parts (export_id, part_no, data, rows, last_id) VALUES ($1, $2, $3, $4, $5)',
          [taken.id, partNo, data, dtos.length, lastId],
          t,
        ),
      after: { ...taken, lastId: lastId ?? taken.lastId, partsWritten: taken.partsWritten + 1 },
      last: dtos.length === 0,
    };
  },
  succeeded: (work) => ({
    set: 'row_count = rows_written, bytes = bytes_written, expires_at = now() + make_interval(secs => $1::float8)',
    values: [work.ttlHours * 3600],
  }),
});

/** Runs (or continues) one export: see runBackground. */
export const runExport = (work: ExportWork, id: string, signal?: AbortSignal): Promise<BackgroundResult> =>
  runBackground(exportEffect, work, id, signal);

import type { Sequelize, Transaction } from 'sequelize';
import { processing } from '../../core/envelope.js';
import type { Identity } from '../../core/identity.js';
import { sqlRows } from '../../core/sql.js';
import {
  nullableNumericColumn,
  nullableTextColumn,
  nullableTimeColumn,
  numericColumn,
  oneOfColumn,
  type StoredRow,
  timeColumn,
} from '../../core/stored-row.js';
import type { IdempotentRequest } from '../../idempotency/engine.js';
import type { Outcome, Reply } from '../../idempotency/outcome.js';
import { visibleTo } from '../auth/who.js';
import type { AuthedContext } from '../context.js';
import { failureAsReply } from '../mutation-replies.js';
import { exportEffect } from './export-run.js';
import {
  type CreateExportInput,
  EXPORT_FORMATS,
  EXPORT_RESOURCES,
  type ExportDto,
  type ExportFormat,
  type ExportResource,
  exportSchema,
} from './exports.schema.js';

export const exportLocation = (id: string) => `/api/v1/exports/${id}`;

/** The POST's answer, declared once: 202 with the task's Location (CONTRACT section 11). */
export const exportAccepted = { status: 202, location: exportLocation } as const;

/** How long a client is told to wait before its first poll (seconds). */
const POLL_AFTER_SECONDS = 1;

/** An exports row as the API reads it: bigint columns come from pg (and from an event's row) as text. */
export interface ExportRow {
  id: string | number;
  resource: ExportResource;
  format: ExportFormat;
  status: ExportDto['status'];
  rowCount: string | number | null;
  bytes: string | number | null;
  failureReason: string | null;
  createdAt: Date;
  completedAt: Date | null;
  expiresAt: Date | null;
}

/** An export's answer columns from its stored row (an event's snapshot: core/stored-row.ts). */
export function exportFromColumns(row: StoredRow): ExportRow {
  return {
    id: numericColumn(row, 'id'),
    resource: oneOfColumn(row, 'resource', EXPORT_RESOURCES),
    format: oneOfColumn(row, 'format', EXPORT_FORMATS),
    status: oneOfColumn(row, 'status', exportSchema.shape.status.options),
    rowCount: nullableNumericColumn(row, 'row_count'),
    bytes: nullableNumericColumn(row, 'bytes'),
    failureReason: nullableTextColumn(row, 'failure_reason'),
    createdAt: timeColumn(row, 'created_at'),
    completedAt: nullableTimeColumn(row, 'completed_at'),
    expiresAt: nullableTimeColumn(row, 'expires_at'),
  };
}

const count = (v: string | number | null) => (v === null || v === undefined ? null : Number(v));

export function toExportDto(row: ExportRow): ExportDto {
  return {
    id: String(row.id),
    resource: row.resource,
    format: row.format,
    status: row.status,
    rowCount: count(row.rowCount),
    bytes: count(row.bytes),
    failureReason: row.failureReason ?? null,
    createdAt: row.createdAt.toISOString(),
    completedAt: row.completedAt ? row.completedAt.toISOString() : null,
    expiresAt: row.expiresAt ? row.expiresAt.toISOString() : null,
  };
}

export const EXPORT_COLUMNS = `id, resource, format, status, row_count AS "rowCount", bytes,
  failure_reason AS "failureReason", created_at AS "createdAt", completed_at AS "completedAt",
  expires_at AS "expiresAt", user_id AS "userId", parts_written AS "partsWritten"`;

/** The 202 of an accepted export, stored with its idempotency record and replayed to every retry. */
function acceptedReply(id: string): Reply {
  return {
    status: exportAccepted.status,
    headers: { Location: exportLocation(id), 'Retry-After': String(POLL_AFTER_SECONDS) },
    body: processing(id),
  };
}

/**
 * The export row, in the engine's transaction (Mode A: the record and the row commit together).
 * Its rows are those created up to now (snapshot_at, docs/DECISIONS.md), an admin's the tenant's.
 */
async function insertExport(
  sequelize: Sequelize,
  tx: Transaction,
  auth: Identity,
  input: CreateExportInput,
): Promise<string> {
  const [row] = await sqlRows<{ id: string }>(
    sequelize,
    `INSERT INTO exports (tenant_id, user_id, all_users, resource, format, created_from, created_to, snapshot_at, created_at, updated_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8, $8) RETURNING id::text AS id`,
    [
      auth.tenantId,
      auth.userId,
      auth.role === 'admin',
      input.resource,
      input.format,
      input.createdFrom ?? null,
      input.createdTo ?? null,
      // The service's clock, as the rows' own created_at (models/timestamps.ts).
      new Date(),
    ],
    tx,
  );
  return row.id;
}

/**
 * POST /exports: the row and the key's record in one transaction, then the job that runs it (a
 * crash between the commit and the add is covered by the recoverer's sweep, server/background-effects.ts).
 */
export async function acceptExport(
  ctx: AuthedContext,
  input: CreateExportInput,
  request: IdempotentRequest,
): Promise<Outcome> {
  const outcome = await ctx.services.idempotency.runLocal(
    request,
    (tx) =>
      failureAsReply(
        insertExport(ctx.services.sequelize, tx, ctx.auth, input).then((id) => ({
          reply: acceptedReply(id),
          resourceId: id,
        })),
      ),
    ctx.signal,
  );
  if (outcome.kind === 'executed') {
    const id = String((outcome.reply.body as ReturnType<typeof processing>).data.resourceId);
    // Best effort: without it the recoverer's sweep adds the job within a round.
    await ctx.services.background?.enqueue(exportEffect.name, id).catch(() => {});
  }
  return outcome;
}

/**
 * Its creator or an admin of its tenant. Another tenant's export is 404 (not revealed); another user
 * of the same tenant gets 403, as for orders and refunds (CONTRACT section 4).
 */
export async function readVisibleExport(
  auth: Identity,
  sequelize: Sequelize,
  id: string,
): Promise<ExportRow & { userId: string; partsWritten: number }> {
  const [row] = await sqlRows<ExportRow & { userId: string; partsWritten: number }>(
    sequelize,
    `SELECT ${EXPORT_COLUMNS} FROM exports WHERE id = $1 AND tenant_id = $2`,
    [id, auth.tenantId],
  );
  return visibleTo(auth, row, 'export');
}

export async function getExport(ctx: AuthedContext, id: string): Promise<ExportDto> {
  return toExportDto(await readVisibleExport(ctx.auth, ctx.services.sequelize, id));
}

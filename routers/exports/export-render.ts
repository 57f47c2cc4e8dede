import type { Sequelize } from 'sequelize';
import { sqlRows } from '../../core/sql.js';
import type { StoredRow } from '../../core/stored-row.js';
import { orderFromColumns } from '../../models/order.js';
import { paymentFromColumns } from '../../models/payment.js';
import { paymentSchema } from '../../payments/payment.schema.js';
import { toPaymentDto } from '../../payments/payment-reply.js';
import { toOrderDto } from '../orders/orders.handlers.js';
import { orderSchema } from '../orders/orders.schema.js';
import type { ExportFormat, ExportResource } from './exports.schema.js';

/** What an export selects: set at its creation, never changed (the worker reads it with the lease). */
export interface ExportScope {
  resource: ExportResource;
  format: ExportFormat;
  tenantId: string;
  /** null: an admin's export, the tenant's rows; else the creator's own. */
  userId: string | null;
  /**
   * The instants as PostgreSQL writes them (text): read into a JS Date they would lose their
   * microseconds, and a row created within the same millisecond would fall on the wrong side.
   */
  createdFrom: string | null;
  createdTo: string | null;
  /** Rows created up to this instant: those that existed when the export was created. */
  snapshotAt: string;
}

/**
 * Each resource's table and transfer object: the file's fields are exactly the API's (the same
 * functions render both), in the order of the schema's keys. A row is read whole (`SELECT *`) and its
 * columns read by the function next to its model (core/stored-row.ts), the one that reads its events'
 * rows too: no list of its columns here.
 */
const RESOURCES = {
  orders: {
    table: 'orders',
    tenantColumn: 'tenant_id',
    idType: 'bigint',
    fields: Object.keys(orderSchema.shape),
    render: (row: StoredRow) => toOrderDto(orderFromColumns(row)),
  },
  payments: {
    table: 'payments',
    tenantColumn: 'merchant_id',
    idType: 'text',
    fields: Object.keys(paymentSchema.shape),
    render: (row: StoredRow) => toPaymentDto(paymentFromColumns(row)),
  },
} as const;

/** The WHERE clause of an export's rows after `afterId` (`$1`..), and its parameters. */
function selection(scope: ExportScope, afterId: string | null): { where: string; values: unknown[] } {
  const r = RESOURCES[scope.resource];
  const values: unknown[] = [scope.tenantId, scope.snapshotAt];
  const where = [`${r.tenantColumn} = $1`, 'created_at <= $2'];
  const add = (sql: (n: number) => string, value: unknown) => {
    values.push(value);
    where.push(sql(values.length));
  };
  // The user's own rows: (tenant_id, user_id, id) is an index of orders, so its id order is cheap.
  if (scope.userId !== null) add((n) => `user_id = $${n}`, scope.userId);
  if (scope.createdFrom) add((n) => `created_at >= $${n}`, scope.createdFrom);
  if (scope.createdTo) add((n) => `created_at <= $${n}`, scope.createdTo);
  if (afterId !== null) add((n) => `id > $${n}::${r.idType}`, afterId);
  return { where: where.join(' AND '), values };
}

/** Counts the matching rows, up to `limit` + 1 (enough to know it is over the limit, no further). */
export async function countUpTo(sequelize: Sequelize, scope: ExportScope, limit: number): Promise<number> {
  const { where, values } = selection(scope, null);
  const [row] = await sqlRows<{ n: number }>(
    sequelize,
    `SELECT count(*)::int AS n FROM (SELECT 1 FROM ${RESOURCES[scope.resource].table} WHERE ${where} LIMIT ${limit + 1}) s`,
    values,
  );
  return row.n;
}

/** The next `limit` matching rows after `afterId`, in id order, as transfer objects. */
export async function nextBatch(
  sequelize: Sequelize,
  scope: ExportScope,
  afterId: string | null,
  limit: number,
): Promise<{ dtos: Record<string, unknown>[]; lastId: string | null }> {
  const r = RESOURCES[scope.resource];
  const { where, values } = selection(scope, afterId);
  const rows = await sqlRows<Record<string, unknown>>(
    sequelize,
    `SELECT * FROM ${r.table} WHERE ${where} ORDER BY id LIMIT ${Math.trunc(limit)}`,
    values,
  );
  const dtos: Record<string, unknown>[] = rows.map((row) => r.render(row));
  const last = rows.at(-1);
  return { dtos, lastId: last ? String(last.id) : null };
}

/**
 * RFC 4180: a field with a comma, a quote or a line break is quoted, its quotes doubled. RFC 4180 has
 * no null, so null is an empty field and an empty string a quoted one (`""`), as PostgreSQL's COPY
 * writes them: a reader can tell a description of "" from none.
 */
export function csvField(value: unknown): string {
  if (value === null || value === undefined) return '';
  const text = typeof value === 'string' ? value : String(value);
  return text === '' || /[",\r\n]/.test(text) ? `"${text.replaceAll('"', '""')}"` : text;
}

/** The CSV header line of a resource (CRLF-terminated, as every record: RFC 4180). */
export function csvHeader(resource: ExportResource): string {
  return `${RESOURCES[resource].fields.join(',')}\r\n`;
}

/** One part of the file: its rows in the export's format. */
export function renderRows(
  resource: ExportResource,
  format: ExportFormat,
  dtos: Record<string, unknown>[],
): string {
  if (format === 'ndjson') return dtos.map((d) => `${JSON.stringify(d)}\n`).join('');
  const fields = RESOURCES[resource].fields;
  return dtos.map((d) => `${fields.map((f) => csvField(d[f])).join(',')}\r\n`).join('');
}

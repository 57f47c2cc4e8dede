import { setTimeout as sleep } from 'node:timers/promises';
import type { Sequelize } from 'sequelize';
import { sqlRows } from '../../core/sql.js';
import type { OrderRow } from '../../models/order.js';
import { toOrderDto } from '../../routers/orders/orders.handlers.js';
import { http } from '../support/http.js';
import { idempotencyKey } from '../support/tokens.js';

/**
 * `count` orders of one user, inserted by one INSERT ... SELECT generate_series (fast), created_at
 * spread one second apart back from `endAt`. The events trigger is skipped for the insert when the
 * role may (session_replication_role: a superuser, as the embedded database's), else it runs.
 */
export async function insertOrders(
  sequelize: Sequelize,
  opts: { tenant: string; userId: string; count: number; prefix: string; endAt?: Date; description?: string },
): Promise<void> {
  const end = opts.endAt ?? new Date();
  const insert = `INSERT INTO orders (tenant_id, user_id, merchant_order_no, amount, currency, description, created_at, updated_at)
    SELECT $1, $2, $3 || '-' || g, ((g % 100000) + 1)::numeric / 100, 'USD', $5,
           $4::timestamptz - make_interval(secs => $6 - g), $4::timestamptz - make_interval(secs => $6 - g)
      FROM generate_series(1, $6::int) AS g`;
  const values = [opts.tenant, opts.userId, opts.prefix, end, opts.description ?? null, opts.count];
  await sequelize.transaction(async (t) => {
    await sequelize
      .query('SET LOCAL session_replication_role = replica', { transaction: t })
      .catch(() => undefined);
    await sqlRows(sequelize, insert, values, t);
  });
}

/** The rows an export of these orders must hold, straight from the table, in id order, as transfer objects. */
export async function ordersOf(
  sequelize: Sequelize,
  tenant: string,
  userId?: string,
): Promise<Array<Record<string, unknown>>> {
  const rows = await sqlRows<OrderRow>(
    sequelize,
    `SELECT id::text, merchant_order_no AS "merchantOrderNo", user_id::text AS "userId", amount, currency,
            description, status, created_at AS "createdAt", updated_at AS "updatedAt"
       FROM orders WHERE tenant_id = $1 AND ($2::bigint IS NULL OR user_id = $2) ORDER BY orders.id`,
    [tenant, userId ?? null],
  );
  return rows.map((r) => toOrderDto(r) as unknown as Record<string, unknown>);
}

/** POST /exports with a new key (or the given one); returns the answer. */
export function startExport(
  auth: Record<string, string>,
  body: Record<string, unknown>,
  opts: { baseUrl?: string; key?: string } = {},
) {
  return http('POST', '/api/v1/exports', {
    baseUrl: opts.baseUrl,
    headers: { ...auth, 'Idempotency-Key': opts.key ?? idempotencyKey() },
    body,
  });
}

/** Polls GET /exports/{id} until it is final (bounded). */
export async function untilFinal(
  auth: Record<string, string>,
  id: string,
  opts: { baseUrl?: string; withinMs?: number } = {},
) {
  const deadline = Date.now() + (opts.withinMs ?? 60_000);
  for (;;) {
    const res = await http('GET', `/api/v1/exports/${id}`, { baseUrl: opts.baseUrl, headers: auth });
    if (res.status !== 200) throw new Error(`GET export ${id}: ${res.status} ${res.text}`);
    if (res.body.data.status !== 'PROCESSING') return res.body.data;
    if (Date.now() > deadline)
      throw new Error(`export ${id} still PROCESSING after ${opts.withinMs ?? 60_000} ms`);
    await sleep(200);
  }
}

/**
 * A minimal RFC 4180 reader: records of fields, quoted fields with doubled quotes and line breaks. An
 * empty field that was not quoted is null (the service writes null so, and "" as `""`).
 */
export function parseCsv(text: string): Array<Array<string | null>> {
  const records: Array<Array<string | null>> = [];
  let field = '';
  let wasQuoted = false;
  let record: Array<string | null> = [];
  let quoted = false;
  const end = () => {
    record.push(field === '' && !wasQuoted ? null : field);
    field = '';
    wasQuoted = false;
  };
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (quoted) {
      if (c === '"' && text[i + 1] === '"') {
        field += '"';
        i++;
      } else if (c === '"') quoted = false;
      else field += c;
    } else if (c === '"') {
      quoted = true;
      wasQuoted = true;
    } else if (c === ',') end();
    else if (c === '\r' && text[i + 1] === '\n') {
      end();
      records.push(record);
      record = [];
      i++;
    } else field += c;
  }
  if (field !== '' || record.length > 0) throw new Error('CSV does not end with CRLF');
  return records;
}

/** CSV records (header first) as objects with the header's keys; an unquoted empty field is null. */
export function csvObjects(text: string): Array<Record<string, string | null>> {
  const [header, ...rows] = parseCsv(text);
  return rows.map((r) => Object.fromEntries(header.map((h, i) => [String(h), r[i]])));
}

import { TRPCClientError } from '@trpc/client';
import { expect } from 'chai';
import pg from 'pg';
import { QueryTypes } from 'sequelize';
import { scopeKey } from '../../idempotency/key.js';
import { http } from '../support/http.js';
import { sharedServer } from '../support/server.js';
import { bearer, idempotencyKey, uniqueTenant } from '../support/tokens.js';
import { trpcClient } from '../support/trpc-client.js';

export type Transport = 'rest' | 'trpc';
export const TRANSPORTS: Transport[] = ['rest', 'trpc'];

/** One answer of either transport in one shape: HTTP status, the envelope (or error envelope), headers. */
export interface Answer {
  status: number;
  // biome-ignore lint/suspicious/noExplicitAny: tests read payloads of every shape
  body: any;
  headers: Headers;
}

/**
 * Calls a procedure over tRPC and turns the outcome into an Answer: a result is its payload (the
 * envelope); a TRPCClientError becomes the REST error envelope built from its data (business code).
 */
export async function viaTrpc(
  baseUrl: string,
  headers: Record<string, string>,
  call: (client: ReturnType<typeof trpcClient>['client']) => Promise<unknown>,
): Promise<Answer> {
  const { client, last } = trpcClient(baseUrl, headers);
  try {
    const body = await call(client);
    return { status: last.status, body, headers: last.headers };
  } catch (err) {
    if (!(err instanceof TRPCClientError)) throw err;
    const data = err.data as {
      httpStatus: number;
      businessCode: number;
      stack?: unknown;
      mismatch?: string[];
    };
    if (data.stack !== undefined) throw new Error('a tRPC error carried a stack');
    if (data.httpStatus !== last.status) throw new Error(`httpStatus ${data.httpStatus} != ${last.status}`);
    return {
      status: data.httpStatus,
      body: {
        code: data.businessCode,
        message: err.message,
        data: data.mismatch ? { mismatch: data.mismatch } : null,
      },
      headers: last.headers,
    };
  }
}

export interface OrderCall {
  transport: Transport;
  headers: Record<string, string>;
  body: unknown;
  baseUrl?: string;
  /** REST only: the path to POST to (the alias `/orders` or the canonical one). */
  path?: string;
}

/** POST /api/v1/orders (REST) or orders.create (tRPC). */
export async function createOrderVia(call: OrderCall): Promise<Answer> {
  const baseUrl = call.baseUrl ?? (await sharedServer()).url;
  if (call.transport === 'rest') {
    return http('POST', call.path ?? '/api/v1/orders', { headers: call.headers, body: call.body, baseUrl });
  }
  // biome-ignore lint/suspicious/noExplicitAny: tests send invalid inputs too
  return viaTrpc(baseUrl, call.headers, (c) => c.orders.create.mutate(call.body as any));
}

/**
 * A new tenant whose `user` has made one keyed order (so its slot rows exist, and one SUCCEEDED
 * record): the tenant and that record's scope, for tests that call idem_claim directly.
 */
export async function tenantWithKeyedOrder(
  user: string,
  prefix: string,
): Promise<{ tenant: string; scope: string }> {
  const tenant = uniqueTenant(prefix);
  const key = idempotencyKey();
  const created = await createOrderVia({
    transport: 'rest',
    headers: { ...bearer(tenant, user), 'Idempotency-Key': key },
    body: { merchantOrderNo: `mo-${key}`, amount: 1 },
  });
  expect(created.status, JSON.stringify(created.body)).to.equal(201);
  return { tenant, scope: orderScope(tenant, user, key) };
}

/** The error envelope of CONTRACT sections 2 and 6 (on tRPC: the error's status and business code). */
export function expectFailure(a: Answer, status: number, code = status): void {
  expect(a.status, JSON.stringify(a.body)).to.equal(status);
  expect(a.body).to.have.all.keys('code', 'message', 'data');
  expect(a.body.code).to.equal(code);
  expect(a.body.message).to.be.a('string').and.not.equal('');
  // data is null, except a 40901's list of the fields that differ (JSON pointers).
  if (code === 40901) expect(a.body.data).to.have.all.keys('mismatch');
  else expect(a.body.data).to.equal(null);
  expect(JSON.stringify(a.body)).to.not.match(/\bat .*\.(ts|js):\d+/);
}

/** The success status of a create on each transport (tRPC answers 200 with the same payload). */
export const createdStatus = (t: Transport) => (t === 'rest' ? 201 : 200);

// biome-ignore lint/suspicious/noExplicitAny: rows of hand-written SQL
export async function sql<T extends object = any>(text: string, bind: unknown[] = []): Promise<T[]> {
  const { sequelize } = (await sharedServer()).services;
  return sequelize.query<T>(text, { bind, type: QueryTypes.SELECT });
}

export interface RecordRow {
  scope_key: string;
  request_hash: string;
  status: string;
  http_status: number | null;
  resource_id: string | null;
  response_body: string | null;
  user_scope: string;
  operation: string;
}

/** Every idempotency record of a tenant (its scope keys start with the tenant id). */
export function recordsOf(tenant: string): Promise<RecordRow[]> {
  return sql<RecordRow>(
    `SELECT scope_key, request_hash, status, http_status, resource_id, response_body, user_scope, operation
     FROM idempotency_records WHERE split_part(user_scope, ':', 1) = $1 ORDER BY created_at, scope_key`,
    [tenant],
  );
}

export interface OrderRow {
  id: string;
  user_id: string;
  merchant_order_no: string;
  amount: string;
  currency: string;
  description: string | null;
  status: string;
}

export function ordersOf(tenant: string): Promise<OrderRow[]> {
  return sql<OrderRow>(
    `SELECT id::text, user_id::text, merchant_order_no, amount::text, currency, description, status
     FROM orders WHERE tenant_id = $1 ORDER BY orders.id`,
    [tenant],
  );
}

export const orderScope = (tenant: string, user: string, key: string) =>
  scopeKey(tenant, user, 'orders.create', key);

/** A raw connection to the test database (for transactions held open across requests). Close it. */
export async function rawPg(): Promise<pg.Client> {
  await sharedServer(); // migrations applied
  const client = new pg.Client(process.env.TEST_DATABASE_URL);
  await client.connect();
  return client;
}

/**
 * A transaction of the test's own on a raw connection: it holds row locks the service's requests
 * run into, for as long as the test wants. Always rolled back and closed.
 */
export async function holdingTransaction<T>(
  work: (client: pg.Client, pid: number) => Promise<T>,
): Promise<T> {
  const client = await rawPg();
  try {
    const pid = (await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0].pid;
    await client.query('BEGIN');
    return await work(client, pid);
  } finally {
    await client.query('ROLLBACK').catch(() => {});
    await client.end();
  }
}

/** Polls until `check` holds (a state of the database, not a duration); throws after `limitMs`. */
export async function until(check: () => Promise<boolean>, what: string, limitMs = 10000): Promise<void> {
  const deadline = Date.now() + limitMs;
  while (Date.now() < deadline) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 5));
  }
  throw new Error(`gave up waiting for: ${what}`);
}

/** Pids of backends waiting on a lock held by `holderPid`. */
export async function blockedBy(holderPid: number): Promise<number[]> {
  const rows = await sql<{ pid: number }>(
    'SELECT pid FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))',
    [holderPid],
  );
  return rows.map((r) => r.pid);
}

export { trpcClient };

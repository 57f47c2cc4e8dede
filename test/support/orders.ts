import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import type { OrderDto } from '../../routers/orders/orders.schema.js';
import { http } from './http.js';
import { idempotencyKey } from './tokens.js';

/**
 * The one order fixture of the suite: an order created over REST with a fresh key, on the given
 * instance (undefined: the shared in-process server); returns its transfer object, or throws.
 * (Tests of the create itself call it through test/idempotency/support.ts createOrderVia, which
 * returns the answer on either transport instead.)
 */
export async function createOrder(
  baseUrl: string | undefined,
  auth: Record<string, string>,
  merchantOrderNo: string,
  amount = '25.00',
): Promise<OrderDto> {
  // A fixture does the client's half of the protocol: a 503 (a pool busy past the wait bound on a
  // loaded machine) or a 202 is retried with the SAME key, so the order is still created once.
  const key = idempotencyKey();
  for (let attempt = 1; ; attempt++) {
    const res = await http('POST', '/api/v1/orders', {
      baseUrl,
      headers: { ...auth, 'Idempotency-Key': key },
      body: { merchantOrderNo, amount },
    });
    if (res.status === 201) return res.body.data;
    if ((res.status !== 503 && res.status !== 202) || attempt >= 20) {
      throw new Error(`createOrder: ${res.status} ${res.text}`);
    }
    await sleep(200 * attempt);
  }
}

/**
 * An order inserted straight into the database by a transaction left open: its event is written and
 * not committed (the feed's and the subscriptions' gap tests, the outbox's rollback). The caller
 * commits or rolls back on `client`, then ends it.
 */
export async function orderInOpenTransaction(
  tenant: string,
  userId: string,
  merchantOrderNo: string,
): Promise<{ client: pg.Client; orderId: string }> {
  const client = new pg.Client({ connectionString: process.env.TEST_DATABASE_URL });
  await client.connect();
  try {
    await client.query('BEGIN');
    const inserted = await client.query<{ id: string }>(
      `INSERT INTO orders (id, tenant_id, user_id, merchant_order_no, amount, currency, status, created_at, updated_at)
       VALUES (nextval('orders_id_seq'), $1, $2, $3, 1, 'USD', 'CREATED', now(), now()) RETURNING id::text`,
      [tenant, userId, merchantOrderNo],
    );
    return { client, orderId: inserted.rows[0].id };
  } catch (err) {
    await client.end();
    throw err;
  }
}

import { setTimeout as sleep } from 'node:timers/promises';
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

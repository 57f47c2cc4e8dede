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
  const res = await http('POST', '/api/v1/orders', {
    baseUrl,
    headers: { ...auth, 'Idempotency-Key': idempotencyKey() },
    body: { merchantOrderNo, amount },
  });
  if (res.status !== 201) throw new Error(`createOrder: ${res.status} ${res.text}`);
  return res.body.data;
}

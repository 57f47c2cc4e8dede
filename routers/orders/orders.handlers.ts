import type { Transaction, WhereOptions } from 'sequelize';
import { rethrowUnique } from '../../core/db-errors.js';
import { Forbidden, NotFound } from '../../core/errors.js';
import type { Identity } from '../../core/identity.js';
import { Order, type OrderRow } from '../../models/order.js';
import type { CreateOrderInput, OrderDto } from './orders.schema.js';

export const orderLocation = (id: string) => `/api/v1/orders/${id}`;

export function toOrderDto(o: OrderRow): OrderDto {
  return {
    id: String(o.id),
    merchantOrderNo: o.merchantOrderNo,
    userId: String(o.userId),
    amount: String(o.amount),
    currency: o.currency,
    description: o.description,
    status: o.status,
    createdAt: o.createdAt.toISOString(),
    updatedAt: o.updatedAt.toISOString(),
  };
}

/**
 * Write, then handle the conflict: `(tenant, merchantOrderNo)` is decided by the unique index, so
 * any number of requests racing with different keys on one merchantOrderNo make one order.
 */
export async function createOrder(
  auth: Identity,
  input: CreateOrderInput,
  tx?: Transaction,
): Promise<OrderDto> {
  try {
    const order = await Order.insertRow(
      {
        tenantId: auth.tenantId,
        userId: auth.userId,
        merchantOrderNo: input.merchantOrderNo,
        amount: input.amount,
        currency: input.currency,
        description: input.description ?? null,
      },
      tx,
    );
    return toOrderDto(order);
  } catch (err) {
    rethrowUnique(err, { orders_tenant_merchant_order_no_key: 'merchantOrderNo' });
  }
}

/** Another tenant's order is 404 (not revealed); the same tenant's order of another user is 403. */
export async function getOrder(auth: Identity, id: string): Promise<OrderDto> {
  const order = await Order.findOne({ where: { tenantId: auth.tenantId, id } });
  if (!order) throw new NotFound('Order not found');
  if (auth.role !== 'admin' && String(order.userId) !== auth.userId) throw new Forbidden('Not your order');
  return toOrderDto(order);
}

export async function listOrders(auth: Identity, page: number, size: number): Promise<OrderDto[]> {
  const where: WhereOptions<Order> =
    auth.role === 'admin' ? { tenantId: auth.tenantId } : { tenantId: auth.tenantId, userId: auth.userId };
  const rows = await Order.findAll({ where, order: [['id', 'ASC']], limit: size, offset: (page - 1) * size });
  return rows.map(toOrderDto);
}

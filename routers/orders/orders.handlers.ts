import type { WhereOptions } from 'sequelize';
import { uniqueAsConflict } from '../../core/db-errors.js';
import type { Identity } from '../../core/identity.js';
import { type Allocated, onlyRow } from '../../core/sql.js';
import { type NewOrder, Order, type OrderRow } from '../../models/order.js';
import { visibleTo } from '../auth/who.js';
import type { BusinessStatement } from '../idempotent-mutation.js';
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
const newOrder = (auth: Identity, input: CreateOrderInput): NewOrder => ({
  tenantId: auth.tenantId,
  userId: auth.userId,
  merchantOrderNo: input.merchantOrderNo,
  amount: input.amount,
  currency: input.currency,
  description: input.description ?? null,
});

const UNIQUE = { orders_tenant_merchant_order_no_key: 'merchantOrderNo' };

/** The same create as one statement, for a keyed request (sent with the claim). */
export async function createOrderStatement(
  auth: Identity,
  input: CreateOrderInput,
  allocated?: Allocated,
): Promise<BusinessStatement<OrderDto>> {
  const row = newOrder(auth, input);
  return {
    sql: (guard) => Order.insertGuarded(row, guard, allocated),
    result: (rows) => toOrderDto(onlyRow<OrderRow>(rows, 'orders')),
    error: (err) => uniqueAsConflict(err, UNIQUE),
    // A new order is CREATED (the column's default); the amount is already in its stored form.
    ...(allocated && {
      answer: toOrderDto({
        ...row,
        id: allocated.id,
        status: 'CREATED',
        createdAt: allocated.at,
        updatedAt: allocated.at,
      }),
    }),
  };
}

/** Another tenant's order is 404 (not revealed); the same tenant's order of another user is 403. */
export async function getOrder(auth: Identity, id: string): Promise<OrderDto> {
  const order = await Order.findOne({ where: { tenantId: auth.tenantId, id } });
  return toOrderDto(visibleTo(auth, order, 'order'));
}

export async function listOrders(auth: Identity, page: number, size: number): Promise<OrderDto[]> {
  const where: WhereOptions<Order> =
    auth.role === 'admin' ? { tenantId: auth.tenantId } : { tenantId: auth.tenantId, userId: auth.userId };
  const rows = await Order.findAll({ where, order: [['id', 'ASC']], limit: size, offset: (page - 1) * size });
  return rows.map(toOrderDto);
}

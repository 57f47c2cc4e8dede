import { randomBytes } from 'node:crypto';
import type { Transaction } from 'sequelize';
import {
  type AppError,
  Conflict,
  ConflictCode,
  Forbidden,
  NotFound,
  ValidationError,
} from '../../core/errors.js';
import { Order } from '../../models/order.js';
import { Payment } from '../../models/payment.js';
import type { Identity } from '../auth/jwt.js';
import type { CreatePaymentInput, PaymentDto } from './payments.schema.js';

export const paymentLocation = (id: string) => `/api/v1/payments/${id}`;

export function toPaymentDto(p: Payment): PaymentDto {
  return {
    id: p.id,
    paymentNo: p.paymentNo,
    merchantId: p.merchantId,
    merchantOrderNo: p.merchantOrderNo,
    orderId: String(p.orderId),
    amount: String(p.amount),
    currency: p.currency,
    status: p.status,
    failureReason: p.failureReason ?? null,
    createdAt: p.createdAt.toISOString(),
    updatedAt: p.updatedAt.toISOString(),
  };
}

export type Preparation =
  | { kind: 'new'; payment: Payment }
  | { kind: 'existing'; payment: Payment }
  | { kind: 'refused'; error: AppError };

/**
 * The checks of CONTRACT section 3, in its order, then the payment row (Tx 1, with the record).
 * A unique violation on (merchant_id, merchant_order_no) propagates: a concurrent request created
 * the payment first, and the caller re-evaluates against it.
 */
export async function preparePayment(
  t: Transaction,
  auth: Identity,
  input: CreatePaymentInput,
): Promise<Preparation> {
  const order = await Order.findOne({
    where: { tenantId: auth.tenantId, merchantOrderNo: input.merchantOrderNo },
    transaction: t,
  });
  if (!order) return { kind: 'refused', error: new NotFound('No order with this merchantOrderNo') };
  if (auth.role !== 'admin' && String(order.userId) !== auth.userId) {
    return { kind: 'refused', error: new Forbidden('Not your order') };
  }
  const existing = await Payment.findOne({
    where: { merchantId: auth.tenantId, merchantOrderNo: input.merchantOrderNo },
    transaction: t,
  });
  if (existing) {
    if (String(existing.amount) === input.amount && existing.currency === input.currency) {
      return { kind: 'existing', payment: existing };
    }
    return {
      kind: 'refused',
      error: new Conflict(
        ConflictCode.BusinessKeyReused,
        'merchantOrderNo already has a payment with another amount or currency',
      ),
    };
  }
  if (String(order.amount) !== input.amount || order.currency !== input.currency) {
    return {
      kind: 'refused',
      error: new ValidationError('amount', "does not match the order's amount and currency"),
    };
  }
  const payment = await Payment.create(
    {
      id: `pay_${randomBytes(12).toString('hex')}`,
      paymentNo: `PN${Date.now().toString(36)}${randomBytes(10).toString('hex')}`,
      merchantId: auth.tenantId,
      merchantOrderNo: input.merchantOrderNo,
      orderId: String(order.id),
      userId: auth.userId,
      amount: input.amount,
      currency: input.currency,
      description: input.description ?? null,
    },
    { transaction: t },
  );
  return { kind: 'new', payment };
}

/** Another tenant's payment is 404; the same tenant's payment of another user is 403. */
export async function getPayment(auth: Identity, id: string): Promise<PaymentDto> {
  const payment = await Payment.findOne({ where: { merchantId: auth.tenantId, id } });
  if (!payment) throw new NotFound('Payment not found');
  if (auth.role !== 'admin' && String(payment.userId) !== auth.userId)
    throw new Forbidden('Not your payment');
  return toPaymentDto(payment);
}

import { randomBytes } from 'node:crypto';
import type { Transaction } from 'sequelize';
import { Conflict, type DomainError, Forbidden, NotFound, ValidationError } from '../core/errors.js';
import type { Identity } from '../core/identity.js';
import { Order } from '../models/order.js';
import { Payment } from '../models/payment.js';
import type { CreatePaymentInput } from './payment.schema.js';

export type Preparation =
  | { kind: 'new'; payment: Payment }
  | { kind: 'existing'; payment: Payment }
  | { kind: 'refused'; error: DomainError };

/**
 * The checks of CONTRACT section 3, in its order, then the payment row (in Tx 1, with the record):
 * no order → 404; another user's order → 403; a payment for the merchantOrderNo → its amount and
 * currency decide (same: that payment; different: 409/40902); the order's amount differs → 400.
 * A unique violation on (merchant_id, merchant_order_no) propagates: a concurrent request created
 * the payment first, and the caller evaluates again against it.
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
    const message = 'merchantOrderNo already has a payment with another amount or currency';
    return { kind: 'refused', error: new Conflict('business_key_reused', message) };
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
      // The order's owner, also when an admin pays it: the payment is theirs to read (CONTRACT section 3).
      userId: String(order.userId),
      amount: input.amount,
      currency: input.currency,
      description: input.description ?? null,
    },
    { transaction: t },
  );
  return { kind: 'new', payment };
}

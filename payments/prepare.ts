import { randomBytes } from 'node:crypto';
import type { InferAttributes } from 'sequelize';
import { Conflict, Forbidden, NotFound, ValidationError } from '../core/errors.js';
import type { Identity } from '../core/identity.js';
import { sqlLiteral } from '../core/sql.js';
import type { Prepared } from '../idempotency/effect.js';
import { Payment } from '../models/payment.js';
import type { CreatePaymentInput } from './payment.schema.js';

/**
 * The order of the merchantOrderNo and the payment it already has, if any: one read
 * (`idem_payment_lookup_refunded`, migration 20261127000101: 20261124000002's with amount_refunded), as text with escaped literals so that it rides
 * in Tx 1's claim round trip (sent after the claim, in the same transaction: under READ COMMITTED it
 * sees what a separate read would).
 */
export function paymentLookupStatement(auth: Identity, input: CreatePaymentInput): string {
  return `SELECT * FROM idem_payment_lookup_refunded(${sqlLiteral(auth.tenantId)}, ${sqlLiteral(input.merchantOrderNo)});`;
}

export interface LookupRow {
  orderId: string;
  orderUserId: string;
  orderAmount: string;
  orderCurrency: string;
  id: string | null;
  paymentOrderId: string | null;
  [column: string]: unknown;
}

/**
 * The checks of CONTRACT section 3, in its order: no order → 404; another user's order → 403; a
 * payment for the merchantOrderNo → its amount and currency decide (same: that payment; different:
 * 409/40902); the order's amount differs → 400. Else a new payment (not yet written). The order and
 * an existing payment come from one read (`paymentLookupStatement`, in Tx 1): `row` is its row.
 */
export function preparePayment(
  row: LookupRow | undefined,
  auth: Identity,
  input: CreatePaymentInput,
): Prepared<Payment> {
  if (!row) return { kind: 'refused', error: new NotFound('No order with this merchantOrderNo') };
  if (auth.role !== 'admin' && String(row.orderUserId) !== auth.userId) {
    return { kind: 'refused', error: new Forbidden('Not your order') };
  }
  if (row.id !== null) {
    const {
      orderId: _o,
      orderUserId: _u,
      orderAmount: _a,
      orderCurrency: _c,
      paymentOrderId,
      ...columns
    } = row;
    const existing = Payment.build({ ...columns, orderId: paymentOrderId } as InferAttributes<Payment>, {
      isNewRecord: false,
      raw: true,
    });
    if (String(existing.amount) === input.amount && existing.currency === input.currency) {
      return { kind: 'existing', row: existing };
    }
    const message = 'merchantOrderNo already has a payment with another amount or currency';
    return { kind: 'refused', error: new Conflict('business_key_reused', message) };
  }
  // The field that differs is named (CONTRACT section 6: the message starts with its path).
  if (String(row.orderAmount) !== input.amount) {
    return { kind: 'refused', error: new ValidationError('amount', "does not match the order's amount") };
  }
  if (row.orderCurrency !== input.currency) {
    return { kind: 'refused', error: new ValidationError('currency', "does not match the order's currency") };
  }
  const now = new Date();
  const payment = Payment.build(
    {
      id: `pay_${randomBytes(12).toString('hex')}`,
      paymentNo: `PN${Date.now().toString(36)}${randomBytes(10).toString('hex')}`,
      merchantId: auth.tenantId,
      merchantOrderNo: input.merchantOrderNo,
      orderId: String(row.orderId),
      // The order's owner, also when an admin pays it: the payment is theirs to read (CONTRACT section 3).
      userId: String(row.orderUserId),
      amount: input.amount,
      currency: input.currency,
      description: input.description ?? null,
      status: 'PROCESSING',
      failureReason: null,
      chargeId: null,
      resumableSince: null,
      amountRefunded: '0.00',
      createdAt: now,
      updatedAt: now,
    },
    // raw: timestamps are Sequelize's read-only attributes, which a plain set() would skip.
    { isNewRecord: false, raw: true },
  );
  // Not yet written: its row goes with Tx 1's last round trip.
  return { kind: 'new', row: payment, insert: Payment.insertStatement(payment) };
}

import { ok } from '../core/envelope.js';
import { canonicalAmount } from '../core/money.js';
import type { Reply } from '../idempotency/outcome.js';
import type { Payment, PaymentRow } from '../models/payment.js';
import type { PaymentDto } from './payment.schema.js';

export const paymentLocation = (id: string) => `/api/v1/payments/${id}`;

/** The success of POST /payments, declared once: its router entry and every stored answer read it. */
export const paymentCreated = { status: 201, location: paymentLocation } as const;

export function toPaymentDto(p: PaymentRow): PaymentDto {
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
    // A row read before migration 20261127000101 (or a lookup without it) has refunded nothing.
    amountRefunded: canonicalAmount(String(p.amountRefunded ?? '0')),
    createdAt: p.createdAt.toISOString(),
    updatedAt: p.updatedAt.toISOString(),
  };
}

/** The final answer of a payment (SUCCEEDED or FAILED alike): 201 with its Location. */
export function paymentReply(payment: Payment): Reply {
  return {
    status: paymentCreated.status,
    headers: { Location: paymentCreated.location(payment.id) },
    body: ok(toPaymentDto(payment)),
  };
}

import { ok } from '../core/envelope.js';
import type { Reply } from '../idempotency/outcome.js';
import type { Refund, RefundRow } from '../models/refund.js';
import type { RefundDto } from './refund.schema.js';

export const refundLocation = (id: string) => `/api/v1/refunds/${id}`;

/** The success of POST /payments/{id}/refunds, declared once: its router entry and every stored answer read it. */
export const refundCreated = { status: 201, location: refundLocation } as const;

export function toRefundDto(r: RefundRow): RefundDto {
  return {
    id: r.id,
    refundNo: r.refundNo,
    paymentId: r.paymentId,
    merchantOrderNo: r.merchantOrderNo,
    amount: String(r.amount),
    currency: r.currency,
    reason: r.reason ?? null,
    status: r.status,
    failureReason: r.failureReason ?? null,
    createdAt: r.createdAt.toISOString(),
    updatedAt: r.updatedAt.toISOString(),
  };
}

/** The final answer of a refund (SUCCEEDED or FAILED alike): 201 with its Location. */
export function refundReply(refund: Refund): Reply {
  return {
    status: refundCreated.status,
    headers: { Location: refundCreated.location(refund.id) },
    body: ok(toRefundDto(refund)),
  };
}

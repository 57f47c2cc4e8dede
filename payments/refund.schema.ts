import { z } from 'zod';
import { isoDate } from '../core/envelope.js';
import { amountSchema } from '../core/money.js';
import { text } from '../core/text.js';

/** The Refund transfer object of CONTRACT section 10. */
export const refundSchema = z.object({
  id: z.string(),
  refundNo: z.string(),
  paymentId: z.string(),
  merchantOrderNo: z.string(),
  amount: z.string(),
  currency: z.string(),
  reason: z.string().nullable(),
  status: z.enum(['PROCESSING', 'SUCCEEDED', 'FAILED']),
  failureReason: z.string().nullable(),
  createdAt: isoDate,
  updatedAt: isoDate,
});
export type RefundDto = z.infer<typeof refundSchema>;

/** A payment id (a path parameter). */
export const paymentIdSchema = text().min(1).max(100);

/** POST /payments/{id}/refunds: the path's payment id and the body (unknown body fields → 400). */
export const createRefundInput = z.strictObject({
  id: paymentIdSchema,
  /** Default: what is left to refund of the payment. */
  amount: amountSchema.optional(),
  // NUL: PostgreSQL text cannot hold it (as an order's description).
  reason: text()
    .max(200)
    .regex(/^[^\0]*$/, 'must not contain NUL characters')
    .nullish(),
  // Correlation only: left out of the fingerprint.
  traceId: text().max(128).optional(),
});
export type CreateRefundInput = z.infer<typeof createRefundInput>;

import { z } from 'zod';
import { envelopeOf, processingSchema } from '../../core/envelope.js';
import { merchantOrderFields } from '../../core/money.js';
import { isoDate } from '../params.schema.js';

export const paymentSchema = z.object({
  id: z.string(),
  paymentNo: z.string(),
  merchantId: z.string(),
  merchantOrderNo: z.string(),
  orderId: z.string(),
  amount: z.string(),
  currency: z.string(),
  status: z.enum(['PROCESSING', 'SUCCEEDED', 'FAILED']),
  failureReason: z.string().nullable(),
  createdAt: isoDate,
  updatedAt: isoDate,
});
export type PaymentDto = z.infer<typeof paymentSchema>;

export const createPaymentInput = z.strictObject(merchantOrderFields);
export type CreatePaymentInput = z.infer<typeof createPaymentInput>;

export const getPaymentInput = z.object({ id: z.string().min(1).max(100) });

export const paymentEnvelope = envelopeOf(paymentSchema);
export const paymentOrProcessing = z.union([paymentEnvelope, processingSchema]);

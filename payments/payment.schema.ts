import { z } from 'zod';
import { isoDate } from '../core/envelope.js';
import { merchantOrderFields } from '../core/merchant-order.js';

/** The Payment transfer object of CONTRACT section 3. */
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
  /** What its SUCCEEDED refunds add up to: "0.00" until a refund succeeds (CONTRACT section 10). */
  amountRefunded: z.string(),
  createdAt: isoDate,
  updatedAt: isoDate,
});
export type PaymentDto = z.infer<typeof paymentSchema>;

/** The body of POST /payments. */
export const createPaymentInput = z.strictObject(merchantOrderFields);
export type CreatePaymentInput = z.infer<typeof createPaymentInput>;

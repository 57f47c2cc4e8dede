import { z } from 'zod';
import { envelopeOf } from '../../core/envelope.js';
import { createPaymentInput, paymentSchema } from '../../payments/payment.schema.js';

export type { CreatePaymentInput, PaymentDto } from '../../payments/payment.schema.js';
export { createPaymentInput, paymentSchema };

export const getPaymentInput = z.object({ id: z.string().min(1).max(100) });

export const paymentEnvelope = envelopeOf(paymentSchema);

import { z } from 'zod';
import { envelopeOf } from '../../core/envelope.js';
import { text } from '../../core/text.js';
import { createPaymentInput, paymentSchema } from '../../payments/payment.schema.js';

export type { CreatePaymentInput, PaymentDto } from '../../payments/payment.schema.js';
export { createPaymentInput, paymentSchema };

export const getPaymentInput = z.object({ id: text().min(1).max(100) });

export const paymentEnvelope = envelopeOf(paymentSchema);

import { z } from 'zod';
import { envelopeOf } from '../../core/envelope.js';
import { createRefundInput, paymentIdSchema, refundSchema } from '../../payments/refund.schema.js';

export type { CreateRefundInput, RefundDto } from '../../payments/refund.schema.js';
export { createRefundInput, refundSchema };

export const getRefundInput = z.object({ id: paymentIdSchema });
export const listRefundsInput = z.object({ id: paymentIdSchema });

export const refundEnvelope = envelopeOf(refundSchema);
export const refundListEnvelope = envelopeOf(z.array(refundSchema));

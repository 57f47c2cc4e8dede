import { z } from 'zod';
import { envelopeOf, isoDate } from '../../core/envelope.js';
import { merchantOrderFields } from '../../core/merchant-order.js';
import { idParams, pageQuery } from '../params.schema.js';

export const orderSchema = z.object({
  id: z.string(),
  merchantOrderNo: z.string(),
  userId: z.string(),
  amount: z.string(),
  currency: z.string(),
  description: z.string().nullable(),
  status: z.enum(['CREATED', 'PAID']),
  createdAt: isoDate,
  updatedAt: isoDate,
});
export type OrderDto = z.infer<typeof orderSchema>;

export const createOrderInput = z.strictObject(merchantOrderFields);
export type CreateOrderInput = z.infer<typeof createOrderInput>;

export const getOrderInput = idParams;
export const listOrdersInput = pageQuery;

export const orderEnvelope = envelopeOf(orderSchema);
export const orderListEnvelope = envelopeOf(z.array(orderSchema));

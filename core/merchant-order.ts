import { z } from 'zod';
import { amountSchema, currencySchema } from './money.js';

export const merchantOrderNoSchema = z
  .string()
  .min(1)
  .max(64)
  .regex(/^[A-Za-z0-9_-]+$/, 'may contain only letters, digits, "_" and "-"');

/** The body of POST /orders and POST /payments (CONTRACT section 3: the same fields and rules). */
export const merchantOrderFields = {
  merchantOrderNo: merchantOrderNoSchema,
  amount: amountSchema,
  currency: currencySchema,
  description: z.string().max(200).nullish(),
  // Correlation only: no business meaning, so it is left out of the fingerprint.
  traceId: z.string().max(128).optional(),
};

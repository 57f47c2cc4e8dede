import { z } from 'zod';
import { amountSchema, currencySchema } from './money.js';
import { text } from './text.js';

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
  // PostgreSQL text cannot hold NUL: the driver would escape it, and the stored description (and a
  // keyed create's answer, known before its write) would differ from the one sent.
  description: text()
    .max(200)
    .regex(/^[^\0]*$/, 'must not contain NUL characters')
    .nullish(),
  // Correlation only: no business meaning, so it is left out of the fingerprint.
  traceId: text().max(128).optional(),
};

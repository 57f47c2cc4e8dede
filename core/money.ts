import { z } from 'zod';

const DECIMAL = /^(0|[1-9][0-9]{0,11})(\.[0-9]{1,2})?$/;
const MESSAGE = 'must be a positive decimal with at most 12 integer and 2 fraction digits';

/** Renders a valid decimal string with exactly two fraction digits: "10" → "10.00". */
export function canonicalAmount(value: string): string {
  const [whole, fraction = ''] = value.split('.');
  return `${whole}.${fraction.padEnd(2, '0')}`;
}

/**
 * An amount given as a JSON number or string; `10`, `10.0` and `"10.00"` are the same amount and
 * all become "10.00" (so the fingerprint and the stored value agree). A float that does not print
 * with at most two fraction digits (0.1 + 0.2) is refused rather than rounded.
 */
export const amountSchema = z.union([z.number(), z.string()], { error: MESSAGE }).transform((v, ctx) => {
  const text = typeof v === 'number' ? (Number.isFinite(v) ? String(v) : '') : v.trim();
  if (!DECIMAL.test(text) || Number(text) <= 0) {
    ctx.addIssue({ code: 'custom', message: MESSAGE });
    return z.NEVER;
  }
  return canonicalAmount(text);
});

export const currencySchema = z
  .string()
  .regex(/^[A-Z]{3}$/, 'must be 3 upper-case letters')
  .default('USD');

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

import { z } from 'zod';
import { documentedAs } from './documented-as.js';

const DIGITS = /^(\d+)(?:\.(\d{0,2}))?$/;
const DECIMAL = /^(0|[1-9][0-9]{0,11})(\.[0-9]{1,2})?$/;
const MESSAGE = 'must be a positive decimal with at most 12 integer and 2 fraction digits';

/**
 * "10", "10.5", "10.50" and "010.5" are one amount: rendered without leading zeros and with exactly
 * two fraction digits, as the contract shows amounts. Any other text comes back unchanged, so two
 * amounts can always be compared as strings (never as floats). The amount schema, the gateway
 * simulator and reconcile all compare through this one function.
 */
export function canonicalAmount(text: string): string {
  const match = DIGITS.exec(text);
  return match ? `${BigInt(match[1])}.${(match[2] ?? '').padEnd(2, '0')}` : text;
}

/**
 * An amount given as a JSON number or string; `10`, `10.0` and `"10.00"` are the same amount and
 * all become "10.00" (so the fingerprint and the stored value agree). A float that does not print
 * with at most two fraction digits (0.1 + 0.2) is refused rather than rounded. A string is taken as
 * sent, never trimmed: " 10.00" is no more a decimal than "+10.00" or "10,00" (CONTRACT section 3).
 */
export const amountSchema = z
  .union([z.number(), z.string()], { error: MESSAGE })
  .transform((v, ctx) => {
    const text = typeof v === 'number' ? (Number.isFinite(v) ? String(v) : '') : v;
    if (!DECIMAL.test(text) || Number(text) <= 0) {
      ctx.addIssue({ code: 'custom', message: MESSAGE });
      return z.NEVER;
    }
    return canonicalAmount(text);
  })
  // What the document says of it: the rule above, as JSON Schema (a number with at most 2 fraction
  // digits, or the same as a decimal string; positive).
  .meta(
    documentedAs({
      description: `A positive amount: ${MESSAGE.replace('must be ', '')}; 10, 10.0 and "10.00" are the same`,
      oneOf: [
        { type: 'number', exclusiveMinimum: 0, maximum: 999999999999.99 },
        // The decimal rule, positive: a lookahead refuses "0", "0.0" and "0.00" as the service does.
        { type: 'string', pattern: `^(?!0(\\.0{1,2})?$)${DECIMAL.source.slice(1, -1)}$` },
      ],
    }),
  );

export const currencySchema = z
  .string()
  .regex(/^[A-Z]{3}$/, 'must be 3 upper-case letters')
  .default('USD');

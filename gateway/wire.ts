import { z } from 'zod';
import { canonicalAmount } from '../core/money.js';

/**
 * The payloads of the gateway contract (CONTRACT.md section 9) as zod schemas, shared by the
 * simulator (which validates requests) and the client (which validates answers): one definition of
 * each shape on both sides of the wire.
 */

const AMOUNT = /^\d{1,12}(\.\d{1,2})?$/;

const key = z.string().min(1).max(100);
const amount = z
  .string()
  .regex(AMOUNT, 'must be a positive decimal string such as "10.00"')
  .refine((a) => !/^[0.]+$/.test(a), 'must be a positive decimal string such as "10.00"')
  .transform(canonicalAmount);
const currency = z.string().regex(/^[A-Z]{3}$/, 'must be 3 upper-case letters');

/** POST /charges: paymentNo (also the Idempotency-Key), a positive decimal string, a currency. */
export const chargeRequestSchema = z.object({ paymentNo: key, amount, currency });

/** A charge as the gateway records it; a half-formed answer never passes for one. */
export const chargeSchema = z.object({
  paymentNo: z.string(),
  chargeId: z.string(),
  amount: z.string(),
  currency: z.string(),
  status: z.enum(['SUCCEEDED', 'DECLINED']),
});

/** POST /refunds without a refundNo: the compensation form, which undoes one whole charge. */
export const refundRequestSchema = z.object({ paymentNo: z.string(), chargeId: z.string() });

export const refundSchema = z.object({ paymentNo: z.string(), chargeId: z.string(), refundId: z.string() });

/**
 * POST /refunds with a refundNo (also the Idempotency-Key): a business refund of part or all of a
 * charge. Strict, so that a misspelt field is a 400 rather than a body read as something else.
 */
export const businessRefundRequestSchema = z.strictObject({
  refundNo: key,
  paymentNo: key,
  chargeId: key,
  amount,
  currency,
});

/** A business refund as the gateway records it; a half-formed answer never passes for one. */
export const businessRefundSchema = z.object({
  refundNo: z.string(),
  refundId: z.string(),
  paymentNo: z.string(),
  chargeId: z.string(),
  amount: z.string(),
  currency: z.string(),
  status: z.enum(['SUCCEEDED', 'DECLINED']),
});

/** A ledger's refund entry: a compensation has only the first three fields, a business refund all. */
export const ledgerRefundSchema = refundSchema.extend({
  refundNo: z.string().optional(),
  amount: z.string().optional(),
  currency: z.string().optional(),
  status: z.enum(['SUCCEEDED', 'DECLINED']).optional(),
});

export const ledgerSchema = z.object({
  charges: z.array(chargeSchema),
  refunds: z.array(ledgerRefundSchema),
});

const rate = z.number().min(0).max(1);

/** A whole fault set; unknown fields are refused so that a typo never silently disables a fault. */
export const faultsSchema = z.strictObject({
  latencyMs: z.number().int().min(0).max(60000).optional(),
  errorRate: rate.optional(),
  timeoutAfterChargeRate: rate.optional(),
  resetAfterChargeRate: rate.optional(),
  declineRate: rate.optional(),
  ignoreIdempotencyKey: z.boolean().optional(),
});

/** The first problem of a failed parse, as one line ("field: message"). */
export function firstProblem(error: z.ZodError): string {
  const issue = error.issues[0];
  const at = issue.code === 'unrecognized_keys' ? [...issue.path, issue.keys[0]] : issue.path;
  return at.length > 0 ? `${at.join('.')}: ${issue.message}` : issue.message;
}

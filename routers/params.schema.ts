import { z } from 'zod';

const MAX_BIGINT = 9223372036854775807n;

/** A positive 64-bit integer id, carried as a decimal string (JSON numbers lose precision past 2^53). */
export const idSchema = z
  .string()
  // abort: the refine must not run on a non-digit string (BigInt('abc') throws, and that message
  // would replace "id: must be ...").
  .regex(/^[1-9][0-9]{0,18}$/, { message: 'must be a positive 64-bit integer', abort: true })
  .refine((v) => BigInt(v) <= MAX_BIGINT, 'must be a positive 64-bit integer');

export const idParams = z.object({ id: idSchema });

/**
 * A query integer: plain decimal digits from a query string, or a JSON integer over tRPC. Written
 * as a pipe so trpc-to-openapi's number coercion leaves it alone (it would accept "1e3", "0x10",
 * "+5" and turn an empty value into 0).
 */
const queryInt = (fallback: number, max: number) =>
  z
    .union([
      z.number(),
      z
        .string()
        .regex(/^[0-9]{1,9}$/, 'must be a positive integer')
        .transform(Number),
    ])
    .pipe(z.number().int().min(1).max(max))
    .default(fallback);

export const pageQuery = z.object({
  page: queryInt(1, 1_000_000),
  size: queryInt(10, 100),
});

export const isoDate = z.iso.datetime();

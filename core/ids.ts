import { z } from 'zod';

/** The largest PostgreSQL bigint: a larger id would make the database answer "out of range" (a 500). */
export const MAX_BIGINT = 9223372036854775807n;

/** A positive decimal of at most 19 digits, without a leading zero (the form of a bigint id). */
export const POSITIVE_ID = /^[1-9][0-9]{0,18}$/;

const MESSAGE = 'must be a positive 64-bit integer';

/**
 * A positive 64-bit integer id, carried as a decimal string (JSON numbers lose precision past 2^53).
 * abort: the refine must not run on a non-digit string (BigInt('abc') throws, and that message
 * would replace "id: must be ...").
 */
export const idSchema = z
  .string()
  .regex(POSITIVE_ID, { message: MESSAGE, abort: true })
  .refine((v) => BigInt(v) <= MAX_BIGINT, MESSAGE);

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

export const pageQuery = z.object({
  page: z.coerce.number().int().min(1).default(1),
  size: z.coerce.number().int().min(1).max(100).default(10),
});

export const isoDate = z.iso.datetime();

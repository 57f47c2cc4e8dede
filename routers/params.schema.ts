import { z } from 'zod';
import { documentedAs } from '../core/documented-as.js';
import { idSchema } from '../core/ids.js';

export const idParams = z.object({ id: idSchema });

/**
 * A query integer: plain decimal digits from a query string, or a JSON integer over tRPC. Written
 * as a pipe so trpc-to-openapi's number coercion leaves it alone (it would accept "1e3", "0x10",
 * "+5" and turn an empty value into 0). A value neither branch takes ("abc", "1.5") fails the union
 * itself, whose own message zod leaves as "Invalid input": the union says what to send instead.
 */
export const queryInt = (fallback: number, max: number) =>
  z
    .union(
      [
        z.number(),
        z
          .string()
          .regex(/^[0-9]{1,9}$/, 'must be a positive integer')
          .transform(Number),
      ],
      { error: 'must be a positive integer' },
    )
    .pipe(z.number().int().min(1).max(max))
    .default(fallback)
    // What the document says of it: the bounds the pipe above enforces (a query string carries it).
    .meta(documentedAs({ type: 'integer', minimum: 1, maximum: max, default: fallback }));

export const pageQuery = z.object({
  page: queryInt(1, 1_000_000),
  size: queryInt(10, 100),
});

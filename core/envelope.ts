import { z } from 'zod';
import type { Envelope } from './errors.js';

/** The success envelope schema around a payload schema (used as every procedure's output). */
export function envelopeOf<T extends z.ZodType>(data: T) {
  return z.object({ code: z.literal(200), message: z.literal('Success'), data });
}

export const processingSchema = z.object({
  code: z.literal(202),
  message: z.string(),
  data: z.object({ status: z.literal('PROCESSING'), resourceId: z.string().nullable() }),
});
export type Processing = z.infer<typeof processingSchema>;

export function ok<T>(data: T): Envelope<T> & { code: 200; message: 'Success' } {
  return { code: 200, message: 'Success', data };
}

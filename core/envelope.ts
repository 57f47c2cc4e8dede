import { z } from 'zod';

/** The response envelope of CONTRACT section 2. */
export interface Envelope<T = unknown> {
  code: number;
  message: string;
  data: T;
}

/** Timestamps of transfer objects: ISO 8601 strings in UTC (CONTRACT section 3). */
export const isoDate = z.iso.datetime();

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

/** An error envelope as stored with a replayed failure (`data` is always null). */
/** An error's `data`: null, or for a 409 40901 the fields that differ from the first request. */
export const errorDataSchema = z.object({ mismatch: z.array(z.string()) }).nullable();
export const errorEnvelopeSchema = z.object({
  code: z.number().int(),
  message: z.string(),
  data: errorDataSchema,
});

export function ok<T>(data: T): Envelope<T> & { code: 200; message: 'Success' } {
  return { code: 200, message: 'Success', data };
}

/**
 * The 202 body of CONTRACT section 2 ("message says the request is still processing"): the first
 * request with this key is still running, or (payments) another key's request for the same order,
 * or (exports) the task the POST started. One message fits all three.
 */
export function processing(resourceId: string | null): Processing {
  return {
    code: 202,
    message: 'The request is still processing',
    data: { status: 'PROCESSING', resourceId },
  };
}

import { z } from 'zod';
import { envelopeOf, isoDate } from '../../core/envelope.js';
import { text } from '../../core/text.js';
import { DestinationRefused, MAX_URL_LENGTH, parseDestinationUrl } from '../../events/destination-guard.js';
import { EVENT_TYPES } from '../../events/feed.js';
import { pageQuery } from '../params.schema.js';

/** http or https, at most 2048 characters, no credentials (events/destination-guard.ts's rules). */
const urlField = z
  .string()
  .max(MAX_URL_LENGTH)
  .superRefine((value, ctx) => {
    try {
      parseDestinationUrl(value);
    } catch (err) {
      if (!(err instanceof DestinationRefused)) throw err;
      ctx.addIssue({ code: 'custom', message: err.message });
    }
  });

export const createEndpointInput = z.strictObject({
  url: urlField,
  types: z
    .array(z.enum(EVENT_TYPES))
    .min(1)
    .max(EVENT_TYPES.length * 4)
    .optional()
    .describe('Event types to deliver (default: every type, also types added later)'),
});

export const endpointIdParams = z.object({ id: text().min(1).max(64) });
export const deliveriesInput = endpointIdParams.extend(pageQuery.shape);

export const endpointSchema = z.object({
  id: z.string(),
  url: z.string(),
  types: z.array(z.string()).nullable().describe('null: every type'),
  status: z.literal('ENABLED'),
  createdAt: isoDate,
});

/** The create's answer: the secret only in the first one; a replay carries null. */
export const createdEndpointSchema = endpointSchema.extend({
  secret: z.string().nullable().describe('whsec_<base64>: shown only in the first answer (null in a replay)'),
});

export const deliverySchema = z.object({
  id: z.string(),
  eventId: z.string(),
  type: z.string(),
  status: z.enum(['PENDING', 'SUCCEEDED', 'FAILED']),
  attempts: z.number().int(),
  lastStatusCode: z.number().int().nullable(),
  lastError: z.string().nullable(),
  nextAttemptAt: isoDate.nullable(),
  createdAt: isoDate,
  updatedAt: isoDate,
});

export const createdEndpointEnvelope = envelopeOf(createdEndpointSchema);
export const endpointEnvelope = envelopeOf(endpointSchema);
export const endpointListEnvelope = envelopeOf(z.array(endpointSchema));
export const deliveryListEnvelope = envelopeOf(z.array(deliverySchema));

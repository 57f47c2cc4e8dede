import { z } from 'zod';
import { documentedAs } from '../../core/documented-as.js';
import { envelopeOf, isoDate } from '../../core/envelope.js';
import { EVENT_TYPES, parsePosition } from '../../events/feed.js';
import { queryInt } from '../params.schema.js';

/** An Event (CONTRACT section 12); `data` is the resource's transfer object after the change. */
export const eventSchema = z.object({
  id: z.string().meta({ description: 'evt_…: stable for ever; also a cursor (its position in the feed)' }),
  type: z.string().meta(documentedAs({ type: 'string', enum: [...EVENT_TYPES] })),
  createdAt: isoDate,
  data: z.unknown().meta(
    documentedAs({
      type: 'object',
      description: "The resource's transfer object after the change (Order, Payment, Refund, Export)",
    }),
  ),
});

const cursor = (field: string) =>
  z
    .string()
    .max(64)
    .refine((s) => parsePosition(s) !== undefined, 'must be a cursor (an event id) this API gave')
    .meta({ description: `${field}: an event id or a \`next\` of an earlier answer` });

const isEventType = (t: string): boolean => (EVENT_TYPES as readonly string[]).includes(t);

/** `types` as a query carries it: comma-separated event types, each one of CONTRACT section 12's. */
const typeList = z
  .string()
  .refine(
    (s) => s.split(',').every(isEventType),
    `must be a comma-separated list of ${EVENT_TYPES.join(', ')}`,
  )
  .transform((s) => [...new Set(s.split(','))]);

/**
 * `types` of the feed and the subscription: the query's comma-separated string, or (a tRPC caller's
 * natural form, and a repeated query parameter) an array of event types. The union carries the
 * message: zod reports a value neither branch takes as "Invalid input". The document describes the
 * string, the one form a query string writes in one parameter.
 */
const eventTypes = z
  .union([z.array(z.enum(EVENT_TYPES)).max(EVENT_TYPES.length), typeList], {
    error: `must be an array of event types or a comma-separated list of them: ${EVENT_TYPES.join(', ')}`,
  })
  .meta(
    documentedAs({
      type: 'string',
      description: `Comma-separated, each one of: ${EVENT_TYPES.join(', ')}`,
      example: 'payment.succeeded,payment.failed',
    }),
  );

/** A query integer 1..100, default 50. */
const limit = queryInt(50, 100);

export const listEventsInput = z.object({
  after: cursor('after').optional(),
  limit,
  types: eventTypes.optional(),
});
export type ListEventsInput = z.infer<typeof listEventsInput>;

export const eventPageSchema = z.object({
  items: z.array(eventSchema),
  next: z
    .string()
    .meta({ description: 'The cursor to pass as `after` next time (given even when items is empty)' }),
});
export type EventPage = z.infer<typeof eventPageSchema>;

export const eventPageEnvelope = envelopeOf(eventPageSchema);

/**
 * The subscription's input: `types` as an array (or the list's comma-separated string), and the id
 * of the last event received, which tRPC's SSE link adds when it reconnects (`tracked()` ids).
 */
export const onEventInput = z
  .strictObject({
    types: eventTypes.optional(),
    lastEventId: cursor('lastEventId').nullish(),
  })
  .optional();
export type OnEventInput = z.infer<typeof onEventInput>;

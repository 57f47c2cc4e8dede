import type { StoredRow } from '../core/stored-row.js';
import { paymentFromColumns } from '../models/payment.js';
import { toPaymentDto } from '../payments/payment-reply.js';

/** A JSON string, or any JSON number (outside strings, the only tokens with digits). */
const STRING_OR_NUMBER = /"(?:[^"\\]|\\.)*"|-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?/g;

/**
 * An event's stored row (`row::text`) as a StoredRow, with every number kept as the text PostgreSQL
 * wrote: a numeric(14,2) keeps "10.50" and a bigint all its digits, which JSON.parse would turn into
 * 10.5 and a rounded double. Each number token is quoted before parsing; strings are matched whole, so
 * digits inside them are left alone. Rows stored as jsonb before 20261128000001 hold their numbers as
 * strings already and parse the same.
 */
export function parseEventRow(text: string): StoredRow {
  const parsed: unknown = JSON.parse(
    text.replace(STRING_OR_NUMBER, (token) => (token.startsWith('"') ? token : `"${token}"`)),
  );
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed))
    throw new TypeError('an event row is not a JSON object');
  return parsed as StoredRow;
}

/**
 * The transfer object of an event's resource, rendered from the row its trigger stored (the row after
 * the change as `json`: models/migrations/20261128000001-events-leaner-writes.cjs) with the same function
 * that renders the API's answers: the transfer object is defined once. Each resource's columns are read
 * by the function next to its model (core/stored-row.ts).
 */
type Renderer = (row: StoredRow) => unknown;

/** One renderer per resource: the part of the event type before the dot. */
const renderers: Record<string, Renderer> = {
  payment: (row) => toPaymentDto(paymentFromColumns(row)),
};

/** Registers the renderer of a resource's events: routers/event-renderers.ts, for those routers/ defines. */
export function registerEventRenderer(resource: string, render: Renderer): void {
  renderers[resource] = render;
}

export function renderEventData(type: string, row: StoredRow): unknown {
  const resource = type.slice(0, type.indexOf('.'));
  const render = renderers[resource];
  if (!render) throw new Error(`no renderer for events of type ${type}`);
  return render(row);
}

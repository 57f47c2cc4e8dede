import type { Payment } from '../models/payment.js';
import { toPaymentDto } from '../payments/payment-reply.js';

/**
 * The transfer object of an event's resource, rendered from the row its trigger stored (`to_jsonb` of
 * the row after the change, every number as text: models/migrations/20261127000001-events-outbox.cjs)
 * with the same function that renders the API's answers: the transfer object is defined once.
 */

/** A stored row with camel-case keys and its `*_at` columns as Dates, as a model instance holds them. */
export function rowFromSnapshot(row: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(row)) {
    const name = key.replace(/_([a-z])/g, (_m, c: string) => c.toUpperCase());
    out[name] = key.endsWith('_at') && typeof value === 'string' ? new Date(value) : value;
  }
  return out;
}

type Renderer = (row: Record<string, unknown>) => unknown;

/** One renderer per resource: the part of the event type before the dot. */
const renderers: Record<string, Renderer> = {
  payment: (row) => toPaymentDto(row as unknown as Payment),
};

/** Registers the renderer of a resource's events: routers/event-renderers.ts, for those routers/ defines. */
export function registerEventRenderer(resource: string, render: Renderer): void {
  renderers[resource] = render;
}

export function renderEventData(type: string, row: Record<string, unknown>): unknown {
  const resource = type.slice(0, type.indexOf('.'));
  const render = renderers[resource];
  if (!render) throw new Error(`no renderer for events of type ${type}`);
  return render(rowFromSnapshot(row));
}

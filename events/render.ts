import type { StoredRow } from '../core/stored-row.js';
import { paymentFromColumns } from '../models/payment.js';
import { toPaymentDto } from '../payments/payment-reply.js';

/**
 * The transfer object of an event's resource, rendered from the row its trigger stored (`to_jsonb` of
 * the row after the change, every numeric and bigint column as text: models/migrations/20261127000001-
 * events-outbox.cjs and 20261127000701-events-cheaper-rows.cjs) with the same function that renders the
 * API's answers: the transfer object is defined once. Each resource's columns are read by the function
 * next to its model (core/stored-row.ts).
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

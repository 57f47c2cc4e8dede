import { registerEventRenderer } from '../events/render.js';
import type { OrderRow } from '../models/order.js';
import type { Refund } from '../models/refund.js';
import { toRefundDto } from '../payments/refund-reply.js';
import { type ExportRow, toExportDto } from './exports/exports.handlers.js';
import { toOrderDto } from './orders/orders.handlers.js';

// The transfer objects of the resources routers/ defines, for their events (events/render.ts).
registerEventRenderer('order', (row) => toOrderDto(row as unknown as OrderRow));
registerEventRenderer('refund', (row) => toRefundDto(row as unknown as Refund));
registerEventRenderer('export', (row) => toExportDto(row as unknown as ExportRow));

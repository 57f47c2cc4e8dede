import { registerEventRenderer } from '../events/render.js';
import { orderFromColumns } from '../models/order.js';
import { refundFromColumns } from '../models/refund.js';
import { toRefundDto } from '../payments/refund-reply.js';
import { exportFromColumns, toExportDto } from './exports/exports.handlers.js';
import { toOrderDto } from './orders/orders.handlers.js';

// The transfer objects of the resources routers/ defines, for their events (events/render.ts).
registerEventRenderer('order', (row) => toOrderDto(orderFromColumns(row)));
registerEventRenderer('refund', (row) => toRefundDto(refundFromColumns(row)));
registerEventRenderer('export', (row) => toExportDto(exportFromColumns(row)));

import { ok } from '../../core/envelope.js';
import { idempotentMutation } from '../idempotent-mutation.js';
import { authedProcedure, router } from '../trpc.js';
import { createOrderStatement, getOrder, listOrders, orderLocation } from './orders.handlers.js';
import {
  createOrderInput,
  getOrderInput,
  listOrdersInput,
  orderEnvelope,
  orderListEnvelope,
} from './orders.schema.js';

const tags = ['orders'];

export const ordersRouter = router({
  create: idempotentMutation({
    openapi: { method: 'POST', path: '/api/v1/orders', tags, summary: 'Create an order' },
    key: 'required',
    success: { status: 201, location: orderLocation },
    nonBusiness: ['traceId'],
    input: createOrderInput,
    output: orderEnvelope,
    statement: ({ ctx, input, allocated }) => createOrderStatement(ctx.auth, input, allocated),
    allocatesIdFrom: 'orders_id_seq',
  }),

  get: authedProcedure
    .meta({ openapi: { method: 'GET', path: '/api/v1/orders/{id}', tags, summary: 'Get an order' } })
    .input(getOrderInput)
    .output(orderEnvelope)
    .query(async ({ ctx, input }) => ok(await getOrder(ctx.auth, input.id))),

  list: authedProcedure
    .meta({
      openapi: {
        method: 'GET',
        path: '/api/v1/orders',
        tags,
        summary: 'List orders (admin: tenant; user: own)',
      },
    })
    .input(listOrdersInput)
    .output(orderListEnvelope)
    .query(async ({ ctx, input }) => ok(await listOrders(ctx.auth, input.page, input.size))),
});

import { ok } from '../../core/envelope.js';
import { created } from '../../server/response.js';
import { idempotent } from '../idempotent-mutation.js';
import { authedProcedure, router } from '../trpc.js';
import { createOrder, getOrder, listOrders, orderLocation } from './orders.handlers.js';
import {
  createOrderInput,
  getOrderInput,
  listOrdersInput,
  orderEnvelope,
  orderListEnvelope,
  orderOrProcessing,
} from './orders.schema.js';

const tags = ['orders'];

export const ordersRouter = router({
  create: authedProcedure
    .meta({
      openapi: { method: 'POST', path: '/api/v1/orders', tags, summary: 'Create an order' },
      successStatus: 201,
      idempotencyKey: 'required',
    })
    .input(createOrderInput)
    .output(orderOrProcessing)
    .use(idempotent({ keyRequired: true, nonBusiness: ['traceId'], location: orderLocation }))
    .mutation(async ({ ctx, input }) => {
      const order = await createOrder(ctx.auth, input, ctx.tx);
      created(ctx, orderLocation(order.id), order.id);
      return ok(order);
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

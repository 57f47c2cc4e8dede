import './event-renderers.js';
import { eventsRouter } from './events/events.router.js';
import { exportsRouter } from './exports/exports.router.js';
import { ordersRouter } from './orders/orders.router.js';
import { paymentsRouter } from './payments/payments.router.js';
import { refundsRouter } from './refunds/refunds.router.js';
import { tokensRouter } from './tokens/tokens.router.js';
import { router } from './trpc.js';
import { usersRouter } from './users/users.router.js';
import { webhookEndpointsRouter } from './webhook-endpoints/webhook-endpoints.router.js';

export const appRouter = router({
  tokens: tokensRouter,
  users: usersRouter,
  orders: ordersRouter,
  payments: paymentsRouter,
  events: eventsRouter,
  webhookEndpoints: webhookEndpointsRouter,
  refunds: refundsRouter,
  exports: exportsRouter,
});

/** The type internal clients import for `@trpc/client`. */
export type AppRouter = typeof appRouter;

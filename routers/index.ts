import './event-renderers.js';
import { exportsRouter } from './exports/exports.router.js';
import { ordersRouter } from './orders/orders.router.js';
import { paymentsRouter } from './payments/payments.router.js';
import { tokensRouter } from './tokens/tokens.router.js';
import { router } from './trpc.js';
import { usersRouter } from './users/users.router.js';

export const appRouter = router({
  tokens: tokensRouter,
  users: usersRouter,
  orders: ordersRouter,
  payments: paymentsRouter,
  exports: exportsRouter,
});

/** The type internal clients import for `@trpc/client`. */
export type AppRouter = typeof appRouter;

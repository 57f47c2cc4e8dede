import { router } from '../server/trpc.js';
import { tokensRouter } from './tokens/tokens.router.js';
import { usersRouter } from './users/users.router.js';

export const appRouter = router({
  tokens: tokensRouter,
  users: usersRouter,
});

/** The type internal clients import for `@trpc/client`. */
export type AppRouter = typeof appRouter;

import { ok } from '../../core/envelope.js';
import { publicProcedure, router } from '../trpc.js';
import { createToken } from './tokens.handlers.js';
import { createTokenInput, tokenEnvelope } from './tokens.schema.js';

export const tokensRouter = router({
  // Never idempotent: a stored answer would hold a bearer token, a secret.
  create: publicProcedure
    .meta({
      openapi: {
        method: 'POST',
        path: '/api/v1/tokens',
        tags: ['tokens'],
        summary: 'Log in',
        protect: false,
      },
      successStatus: 201,
    })
    .input(createTokenInput)
    .output(tokenEnvelope)
    .mutation(async ({ ctx, input }) => {
      const { JWT_SECRET, TOKEN_TTL_SECONDS } = ctx.services.config;
      return ok(await createToken(JWT_SECRET, TOKEN_TTL_SECONDS, input));
    }),
});

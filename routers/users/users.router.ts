import { z } from 'zod';
import { ok, processingSchema } from '../../core/envelope.js';
import { created, noContent } from '../../server/response.js';
import { idempotent } from '../idempotent-mutation.js';
import { authedProcedure, requireAdmin, router } from '../trpc.js';
import * as users from './users.handlers.js';
import {
  createUserInput,
  getUserInput,
  listUsersInput,
  replaceUserInput,
  setStatusInput,
  updateUserInput,
  userEnvelope,
  userListEnvelope,
  userPageEnvelope,
} from './users.schema.js';

const tags = ['users'];
const userOrProcessing = z.union([userEnvelope, processingSchema]);
const location = users.userLocation;

export const usersRouter = router({
  list: authedProcedure
    .meta({ openapi: { method: 'GET', path: '/api/v1/users', tags, summary: 'List users (v1: array)' } })
    .input(listUsersInput)
    .output(userListEnvelope)
    .use(requireAdmin)
    .query(async ({ ctx, input }) => ok((await users.listUsers(ctx.auth, input.page, input.size)).items)),

  listPage: authedProcedure
    .meta({
      openapi: { method: 'GET', path: '/api/v2/users', tags, summary: 'List users (v2: page object)' },
    })
    .input(listUsersInput)
    .output(userPageEnvelope)
    .use(requireAdmin)
    .query(async ({ ctx, input }) => {
      const { items, total } = await users.listUsers(ctx.auth, input.page, input.size);
      return ok({ items, page: input.page, size: input.size, total });
    }),

  get: authedProcedure
    .meta({ openapi: { method: 'GET', path: '/api/v1/users/{id}', tags, summary: 'Get a user' } })
    .input(getUserInput)
    .output(userEnvelope)
    .query(async ({ ctx, input }) => ok(await users.getUser(ctx.auth, input.id))),

  create: authedProcedure
    .meta({
      openapi: { method: 'POST', path: '/api/v1/users', tags, summary: 'Create a user' },
      successStatus: 201,
      idempotencyKey: 'optional',
    })
    .input(createUserInput)
    .output(userOrProcessing)
    .use(idempotent({ keyRequired: false, adminOnly: true, location }))
    .mutation(async ({ ctx, input }) => {
      const user = await users.createUser(ctx.auth, input, ctx.tx);
      created(ctx, location(user.id), user.id);
      return ok(user);
    }),

  replace: authedProcedure
    .meta({
      openapi: { method: 'PUT', path: '/api/v1/users/{id}', tags, summary: 'Replace a user' },
      idempotencyKey: 'optional',
    })
    .input(replaceUserInput)
    .output(userOrProcessing)
    .use(idempotent({ keyRequired: false, adminOnly: true, location }))
    .mutation(async ({ ctx, input }) => ok(await users.replaceUser(ctx.auth, input, ctx.tx))),

  update: authedProcedure
    .meta({
      openapi: { method: 'PATCH', path: '/api/v1/users/{id}', tags, summary: 'Change some fields of a user' },
      idempotencyKey: 'optional',
    })
    .input(updateUserInput)
    .output(userOrProcessing)
    .use(idempotent({ keyRequired: false, location }))
    .mutation(async ({ ctx, input }) => ok(await users.updateUser(ctx.auth, input, ctx.tx))),

  setStatus: authedProcedure
    .meta({
      openapi: { method: 'PUT', path: '/api/v1/users/{id}/status', tags, summary: 'Set a user status' },
      idempotencyKey: 'optional',
    })
    .input(setStatusInput)
    .output(userOrProcessing)
    .use(idempotent({ keyRequired: false, adminOnly: true, location }))
    .mutation(async ({ ctx, input }) =>
      ok(await users.setUserStatus(ctx.auth, input.id, input.status, ctx.tx)),
    ),

  delete: authedProcedure
    .meta({
      openapi: { method: 'DELETE', path: '/api/v1/users/{id}', tags, summary: 'Delete a user' },
      successStatus: 204,
      idempotencyKey: 'optional',
    })
    .input(getUserInput)
    .output(processingSchema.optional())
    .use(idempotent({ keyRequired: false, adminOnly: true, location }))
    .mutation(async ({ ctx, input }) => {
      await users.deleteUser(ctx.auth, input.id, ctx.tx);
      noContent(ctx);
      return undefined;
    }),
});

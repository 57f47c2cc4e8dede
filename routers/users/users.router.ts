import { z } from 'zod';
import { created, noContent } from '../../server/response.js';
import { adminProcedure, authedProcedure, router } from '../../server/trpc.js';
import { ok } from '../envelope.js';
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

export const usersRouter = router({
  list: adminProcedure
    .meta({ openapi: { method: 'GET', path: '/api/v1/users', tags, summary: 'List users (v1: array)' } })
    .input(listUsersInput)
    .output(userListEnvelope)
    .query(async ({ ctx, input }) => ok((await users.listUsers(ctx.auth, input.page, input.size)).items)),

  listPage: adminProcedure
    .meta({
      openapi: { method: 'GET', path: '/api/v2/users', tags, summary: 'List users (v2: page object)' },
    })
    .input(listUsersInput)
    .output(userPageEnvelope)
    .query(async ({ ctx, input }) => {
      const { items, total } = await users.listUsers(ctx.auth, input.page, input.size);
      return ok({ items, page: input.page, size: input.size, total });
    }),

  get: authedProcedure
    .meta({ openapi: { method: 'GET', path: '/api/v1/users/{id}', tags, summary: 'Get a user' } })
    .input(getUserInput)
    .output(userEnvelope)
    .query(async ({ ctx, input }) => ok(await users.getUser(ctx.auth, input.id))),

  create: adminProcedure
    .meta({
      openapi: { method: 'POST', path: '/api/v1/users', tags, summary: 'Create a user' },
      successStatus: 201,
    })
    .input(createUserInput)
    .output(userEnvelope)
    .mutation(async ({ ctx, input }) => {
      const user = await users.createUser(ctx.auth, input);
      created(ctx, users.userLocation(user.id));
      return ok(user);
    }),

  replace: adminProcedure
    .meta({ openapi: { method: 'PUT', path: '/api/v1/users/{id}', tags, summary: 'Replace a user' } })
    .input(replaceUserInput)
    .output(userEnvelope)
    .mutation(async ({ ctx, input }) => ok(await users.replaceUser(ctx.auth, input))),

  update: authedProcedure
    .meta({
      openapi: { method: 'PATCH', path: '/api/v1/users/{id}', tags, summary: 'Change some fields of a user' },
    })
    .input(updateUserInput)
    .output(userEnvelope)
    .mutation(async ({ ctx, input }) => ok(await users.updateUser(ctx.auth, input))),

  setStatus: adminProcedure
    .meta({
      openapi: { method: 'PUT', path: '/api/v1/users/{id}/status', tags, summary: 'Set a user status' },
    })
    .input(setStatusInput)
    .output(userEnvelope)
    .mutation(async ({ ctx, input }) => ok(await users.setUserStatus(ctx.auth, input.id, input.status))),

  delete: adminProcedure
    .meta({
      openapi: { method: 'DELETE', path: '/api/v1/users/{id}', tags, summary: 'Delete a user' },
      successStatus: 204,
    })
    .input(getUserInput)
    .output(z.void())
    .mutation(async ({ ctx, input }) => {
      await users.deleteUser(ctx.auth, input.id);
      noContent(ctx);
    }),
});

import { ok } from '../../core/envelope.js';
import { idempotentMutation } from '../idempotent-mutation.js';
import { adminProcedure, authedProcedure, router } from '../trpc.js';
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
  list: adminProcedure(listUsersInput)
    .meta({ openapi: { method: 'GET', path: '/api/v1/users', tags, summary: 'List users (v1: array)' } })
    .output(userListEnvelope)
    .query(async ({ ctx, input }) => ok((await users.listUsers(ctx.auth, input.page, input.size)).items)),

  listPage: adminProcedure(listUsersInput)
    .meta({
      openapi: { method: 'GET', path: '/api/v2/users', tags, summary: 'List users (v2: page object)' },
    })
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

  create: idempotentMutation({
    openapi: { method: 'POST', path: '/api/v1/users', tags, summary: 'Create a user' },
    key: 'optional',
    admin: true,
    success: { status: 201, location: users.userLocation },
    input: createUserInput,
    output: userEnvelope,
    runAlone: ({ ctx, input, check }) =>
      check ? users.createUserChecked(ctx.auth, input, check) : users.createUser(ctx.auth, input),
    statement: ({ ctx, input, allocated }) => users.createUserStatement(ctx.auth, input, allocated),
    allocatesIdFrom: 'users_id_seq',
    readFirst: (input) => input.password !== undefined,
  }),

  replace: idempotentMutation({
    openapi: { method: 'PUT', path: '/api/v1/users/{id}', tags, summary: 'Replace a user' },
    key: 'optional',
    admin: true,
    success: { status: 200 },
    input: replaceUserInput,
    output: userEnvelope,
    run: ({ ctx, input, tx }) => users.replaceUser(ctx.auth, input, tx),
  }),

  update: idempotentMutation({
    openapi: { method: 'PATCH', path: '/api/v1/users/{id}', tags, summary: 'Change some fields of a user' },
    key: 'optional',
    success: { status: 200 },
    input: updateUserInput,
    output: userEnvelope,
    run: ({ ctx, input, tx }) => users.updateUser(ctx.auth, input, tx),
  }),

  setStatus: idempotentMutation({
    openapi: { method: 'PUT', path: '/api/v1/users/{id}/status', tags, summary: 'Set a user status' },
    key: 'optional',
    admin: true,
    success: { status: 200 },
    input: setStatusInput,
    output: userEnvelope,
    run: ({ ctx, input, tx }) => users.setUserStatus(ctx.auth, input.id, input.status, tx),
  }),

  delete: idempotentMutation({
    openapi: { method: 'DELETE', path: '/api/v1/users/{id}', tags, summary: 'Delete a user' },
    key: 'optional',
    admin: true,
    success: { status: 204 },
    input: getUserInput,
    run: ({ ctx, input, tx }) => users.deleteUser(ctx.auth, input.id, tx),
  }),
});

import { z } from 'zod';
import { envelopeOf, isoDate } from '../../core/envelope.js';
import { idSchema } from '../../core/ids.js';
import { text } from '../../core/text.js';
import { idParams, pageQuery } from '../params.schema.js';

// PostgreSQL text cannot hold NUL: the driver escaped it and the stored name silently differed.
const name = text()
  .min(1)
  .max(100)
  .regex(/^[^\0]*$/, 'must not contain NUL characters');
// The pipe is load-bearing: trpc-to-openapi sets `coerce` on every plain z.number() field of an input
// object, bodies included, and mutates the shared schema (so /trpc is hit too): "30", null and true
// would become 30, 0 and 1. It leaves a pipe alone.
const age = z.number().int().min(0).max(150).pipe(z.number());
export const usernameSchema = z
  .string()
  .min(3)
  .max(50)
  .regex(/^[A-Za-z0-9_.-]+$/, 'may contain only letters, digits, "_", "." and "-"');
const email = z.email().max(254);
const role = z.enum(['admin', 'user']);
const status = z.enum(['ACTIVE', 'DISABLED']);

export const userSchema = z.object({
  id: z.string(),
  name: z.string(),
  age: z.number().int(),
  username: z.string().nullable(),
  email: z.string().nullable(),
  role,
  status,
  createdAt: isoDate,
  updatedAt: isoDate,
});
export type UserDto = z.infer<typeof userSchema>;

export const createUserInput = z.strictObject({
  name,
  age,
  username: usernameSchema.nullish(),
  email: email.nullish(),
  password: text().min(8).max(128).nullish(),
  role: role.default('user'),
});
export type CreateUserInput = z.infer<typeof createUserInput>;

// PUT replaces every replaceable field: username and email are required keys (null clears them).
export const replaceUserInput = z.strictObject({
  id: idSchema,
  name,
  age,
  username: usernameSchema.nullable(),
  email: email.nullable(),
});
export type ReplaceUserInput = z.infer<typeof replaceUserInput>;

// role and status are not here, so a PATCH carrying them is an unknown field: 400.
export const updateUserInput = z
  .strictObject({
    id: idSchema,
    name: name.optional(),
    age: age.optional(),
    email: email.nullable().optional(),
  })
  .refine((v) => v.name !== undefined || v.age !== undefined || v.email !== undefined, {
    message: 'at least one of name, age, email is required',
    path: ['body'],
  });
export type UpdateUserInput = z.infer<typeof updateUserInput>;

export const setStatusInput = z.strictObject({ id: idSchema, status });

export const getUserInput = idParams;
export const listUsersInput = pageQuery;

export const userEnvelope = envelopeOf(userSchema);
export const userListEnvelope = envelopeOf(z.array(userSchema));
export const userPageEnvelope = envelopeOf(
  z.object({
    items: z.array(userSchema),
    page: z.number().int(),
    size: z.number().int(),
    total: z.number().int(),
  }),
);

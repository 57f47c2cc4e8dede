import type { AnyRouter } from '@trpc/server';
import type { OpenApiMeta } from 'trpc-to-openapi';
import { z } from 'zod';
import { proceduresOf } from './trpc-internals.js';

/**
 * What a procedure declares about its REST answer, once: the OpenAPI document and the REST transport
 * both read it from here (idempotentMutation writes it from its own definition).
 */
export type ProcedureMeta = {
  /** REST success status when it is not 200 (201 create, 202 accepted task, 204 delete). */
  successStatus?: 201 | 202 | 204;
  /** A 201 with a Location header: the canonical path of the created resource. */
  createdLocation?: boolean;
  /** The Idempotency-Key header this operation takes. */
  idempotencyKey?: 'required' | 'optional';
  /**
   * Its one statement checks the user row itself, so authentication reads nothing first
   * (routers/trpc.ts authedProcedure): for a token of any role, or (`admin`) only for an admin's
   * token; without a key (`keyless`: a create that is one statement), with one (`keyed`: a keyed
   * create sent as one statement, idempotency/engine.ts runAtOnce), or both.
   */
  userCheckInWrite?: { role: 'admin' | 'any-role'; keyless: boolean; keyed: boolean };
  /**
   * A keyed create whose answer is known before its write: its new row's id comes from this sequence
   * (a block of them taken ahead, models/id-blocks.ts; on the general path, the auth read allocates
   * it when the key has no record, routers/auth/who.ts readUser).
   */
  allocatesIdFrom?: string;
};

export type Meta = OpenApiMeta<ProcedureMeta>;

const metaSchema = z.object({
  successStatus: z.union([z.literal(201), z.literal(202), z.literal(204)]).optional(),
  createdLocation: z.boolean().optional(),
  idempotencyKey: z.enum(['required', 'optional']).optional(),
  userCheckInWrite: z
    .object({ role: z.enum(['admin', 'any-role']), keyless: z.boolean(), keyed: z.boolean() })
    .optional(),
  allocatesIdFrom: z.string().optional(),
  openapi: z.object({ method: z.string(), path: z.string() }).loose().optional(),
});

export type DeclaredMeta = z.infer<typeof metaSchema>;

/** Each procedure's meta by procedure path. */
export function metaByProcedure(router: AnyRouter): Map<string, DeclaredMeta> {
  return new Map(proceduresOf(router).map(({ path, meta }) => [path, metaSchema.parse(meta ?? {})]));
}

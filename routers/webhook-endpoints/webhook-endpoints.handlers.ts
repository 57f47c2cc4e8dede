import type { Transaction } from 'sequelize';
import type { z } from 'zod';
import { ValidationError } from '../../core/errors.js';
import { checkDestination, DestinationRefused, policyFromConfig } from '../../events/destination-guard.js';
import {
  deleteEndpoint,
  type EndpointDto,
  insertEndpoint,
  newEndpointId,
  SecretBox,
} from '../../events/webhook-store.js';
import type { AuthedContext } from '../context.js';
import type { createEndpointInput } from './webhook-endpoints.schema.js';

export const endpointLocation = (id: string) => `/api/v1/webhook-endpoints/${id}`;

/**
 * Production's private-network refusal (SSRF), at creation: every address the host resolves to is
 * checked (the worker checks again at each delivery, and connects only to the address it checked).
 * Outside production nothing is resolved here: a host that does not resolve yet is the receiver's
 * business, and each attempt records why it failed.
 */
export async function checkEndpointUrl(ctx: AuthedContext, url: string): Promise<void> {
  const policy = policyFromConfig(ctx.services.config);
  if (!policy.production || policy.allowPrivateNetworks) return;
  try {
    await checkDestination(url, policy);
  } catch (err) {
    if (err instanceof DestinationRefused) throw new ValidationError('url', err.message);
    throw err;
  }
}

/** Writes the endpoint with its secret sealed; the answer holds `secret: null` (it is stored as such). */
export async function createEndpoint(
  ctx: AuthedContext,
  input: z.output<typeof createEndpointInput>,
  created: { id: string; secret: string },
  tx: Transaction,
): Promise<EndpointDto & { secret: string | null }> {
  const { sequelize, config } = ctx.services;
  const types = input.types ? [...new Set(input.types)].sort() : null;
  const endpoint = await insertEndpoint(sequelize, tx, {
    id: created.id,
    tenantId: ctx.auth.tenantId,
    url: input.url,
    types,
    secretCiphertext: new SecretBox(config).seal(created.id, created.secret),
  });
  return { ...endpoint, secret: null };
}

export function removeEndpoint(ctx: AuthedContext, id: string, tx: Transaction): Promise<void> {
  return deleteEndpoint(ctx.services.sequelize, tx, ctx.auth.tenantId, id);
}

export { newEndpointId };

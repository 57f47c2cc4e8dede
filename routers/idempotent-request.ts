import type { OpenApiMeta } from 'trpc-to-openapi';
import type { Config } from '../core/config.js';
import { fillTemplate } from '../core/path-template.js';
import type { IdempotentRequest } from '../idempotency/engine.js';
import {
  type FingerprintInput,
  fieldDigests,
  fingerprint,
  fingerprintV1,
} from '../idempotency/fingerprint.js';
import { scopeKey, userScope } from '../idempotency/key.js';
import type { AuthedContext } from './context.js';

interface Declared {
  openapi: NonNullable<OpenApiMeta['openapi']>;
  nonBusiness?: readonly string[];
  ttlHours?: (config: Config) => number;
}

/**
 * The request as the engine sees it: its scope (tenant, user, operation, key) and its fingerprint
 * over the zod-parsed input (defaults applied). Both transports build the same one, so a retry may
 * switch between REST and tRPC with the same key.
 */
export function idempotentRequest(
  ctx: AuthedContext,
  def: Declared,
  input: unknown,
  operation: string,
  key: string,
  location?: (resourceId: string) => string,
): IdempotentRequest {
  const { config } = ctx.services;
  const { tenantId, userId } = ctx.auth;
  const body = input ?? {};
  // Canonical REST path with the input's path parameters filled in (aliases already resolved).
  const path = fillTemplate(def.openapi.path, (name) =>
    encodeURIComponent(String(fieldOf(body, name) ?? '')),
  );
  const fields: FingerprintInput = {
    method: def.openapi.method,
    path,
    route: def.openapi.path,
    mediaType: ctx.headers['content-type'],
    apiVersion: /^\/api\/(v\d+)\//.exec(path)?.[1] ?? 'v1',
    tenantId,
    userId,
    body,
    nonBusiness: def.nonBusiness,
  };
  const hmacKey = config.IDEMPOTENCY_HMAC_KEY;
  // The fp1 digest and the per-field digests are made on first use: a retry whose fp2 digest matches
  // its record (a replay) needs neither; a claim stores the field digests, a 409 compares them.
  let legacyHash: string | undefined;
  let fieldHashes: Record<string, string> | undefined;
  // Not a create (no location of a created resource): the existing resource its path names, if any.
  const subject = location ? undefined : subjectOf(def.openapi.path, body);
  return {
    scopeKey: scopeKey(tenantId, userId, operation, key),
    userScope: userScope(tenantId, userId),
    operation,
    ttlHours: def.ttlHours?.(config) ?? config.IDEMPOTENCY_TTL_HOURS,
    location: location ?? subject?.location,
    subjectId: subject?.id,
    receivedAt: ctx.receivedAt,
    requestHash: fingerprint(hmacKey, fields),
    get legacyHash() {
      legacyHash ??= fingerprintV1(hmacKey, fields);
      return legacyHash;
    },
    get fieldHashes() {
      fieldHashes ??= fieldDigests(hmacKey, fields);
      return fieldHashes;
    },
  };
}

/**
 * The resource an operation on `/api/vN/<collection>/{id}[/…]` acts on (a PATCH, PUT or DELETE of a
 * user, a DELETE of a webhook endpoint): its id from the input and its canonical path, which an
 * in-flight duplicate's 202 names (`Location`, `data.resourceId`).
 */
function subjectOf(
  route: string,
  body: unknown,
): { id: string; location: (id: string) => string } | undefined {
  const base = /^\/api\/v\d+\/[^/{}]+\/\{id\}/.exec(route)?.[0];
  const id = fieldOf(body, 'id');
  if (!base || (typeof id !== 'string' && typeof id !== 'number')) return undefined;
  return { id: String(id), location: (rid) => base.replace('{id}', encodeURIComponent(rid)) };
}

function fieldOf(value: unknown, name: string): unknown {
  return typeof value === 'object' && value !== null
    ? Object.getOwnPropertyDescriptor(value, name)?.value
    : undefined;
}

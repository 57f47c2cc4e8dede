import { createHmac } from 'node:crypto';

/** Bumped whenever a rule below changes, so old and new instances never compare unlike digests. */
export const NORMALISATION_VERSION = 'fp1';

export interface FingerprintInput {
  method: string;
  /** Canonical path with path parameters filled in (aliases already resolved). */
  path: string;
  /** Content-Type header as sent; lower-cased, parameters dropped. */
  mediaType: string | undefined;
  apiVersion: string;
  tenantId: string;
  userId: string;
  /** The zod-parsed input: defaults applied, amounts already canonical strings. */
  body: unknown;
  /** Fields that carry no business meaning (e.g. traceId): left out. */
  nonBusiness?: readonly string[];
}

/** JSON with object keys sorted at every level; undefined members dropped as JSON does. */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value) ?? 'null';
  if (Array.isArray(value))
    return `[${value.map((v) => canonicalJson(v === undefined ? null : v)).join(',')}]`;
  const entries = Object.entries(value as Record<string, unknown>)
    .filter(([, v]) => v !== undefined)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
}

export function normaliseMediaType(header: string | undefined): string {
  return (header ?? 'application/json').split(';')[0].trim().toLowerCase() || 'application/json';
}

/** The normalised body: non-business fields removed, keys sorted. */
export function normaliseBody(body: unknown, nonBusiness: readonly string[] = []): string {
  if (body && typeof body === 'object' && !Array.isArray(body)) {
    const copy: Record<string, unknown> = { ...(body as Record<string, unknown>) };
    for (const field of nonBusiness) delete copy[field];
    return canonicalJson(copy);
  }
  return canonicalJson(body ?? null);
}

/**
 * HMAC-SHA-256 (server-held key) over the fields of CONTRACT section 5, each JSON-encoded and
 * newline-joined: JSON string encoding escapes newlines, so no two inputs share a message.
 */
export function fingerprint(key: string, input: FingerprintInput): string {
  const parts = [
    NORMALISATION_VERSION,
    input.method.toUpperCase(),
    input.path,
    normaliseMediaType(input.mediaType),
    input.apiVersion,
    input.tenantId,
    input.userId,
  ].map((p) => JSON.stringify(p));
  parts.push(normaliseBody(input.body, input.nonBusiness));
  return createHmac('sha256', key).update(parts.join('\n')).digest('hex');
}

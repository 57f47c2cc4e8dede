import { ValidationError } from '../core/errors.js';

export const IDEMPOTENCY_KEY_PATTERN = /^[A-Za-z0-9_-]{16,64}$/;

/** Reads the Idempotency-Key header: absent → undefined (or 400 when required); malformed → 400. */
export function readIdempotencyKey(
  header: string | string[] | undefined,
  required: boolean,
): string | undefined {
  if (header === undefined || header === '') {
    if (required) throw new ValidationError('Idempotency-Key', 'header is required');
    return undefined;
  }
  if (Array.isArray(header) || !IDEMPOTENCY_KEY_PATTERN.test(header)) {
    throw new ValidationError('Idempotency-Key', 'must be 16 to 64 characters of A-Z, a-z, 0-9, "_" and "-"');
  }
  return header;
}

/**
 * tenant + user + operation + key. None of the parts may contain ':' (tenant ids, decimal user ids,
 * procedure names and keys are all restricted), so the joined form is unambiguous; at most
 * 36 + 19 + 40 + 64 + 3 < 200 characters.
 */
export function scopeKey(tenantId: string, userId: string, operation: string, key: string): string {
  return `${tenantId}:${userId}:${operation}:${key}`;
}

export function userScope(tenantId: string, userId: string): string {
  return `${tenantId}:${userId}`;
}

import { randomBytes } from 'node:crypto';
import jwt from 'jsonwebtoken';
import { signToken } from '../../routers/auth/jwt.js';
import { TEST_ENV } from './server.js';

let counter = 0;

/** A tenant id no other test uses: tests never share rows. */
export function uniqueTenant(prefix = 't'): string {
  counter += 1;
  return `${prefix}-${randomBytes(4).toString('hex')}-${counter}`;
}

export function tokenFor(
  tenantId: string,
  userId: string,
  role: 'admin' | 'user' = 'user',
  ttl = 3600,
): string {
  return signToken(TEST_ENV.JWT_SECRET, { tenantId, userId, role }, ttl).token;
}

export function bearer(
  tenantId: string,
  userId: string,
  role: 'admin' | 'user' = 'user',
): Record<string, string> {
  return { Authorization: `Bearer ${tokenFor(tenantId, userId, role)}` };
}

/** Hand-made tokens for the auth matrix (expired, wrong secret, alg none, no exp). */
export function rawToken(
  payload: object,
  secret = TEST_ENV.JWT_SECRET,
  options: jwt.SignOptions = {},
): string {
  return jwt.sign(payload, secret, { algorithm: 'HS256', ...options });
}

export function unsignedToken(payload: object): string {
  const enc = (o: object) => Buffer.from(JSON.stringify(o)).toString('base64url');
  return `${enc({ alg: 'none', typ: 'JWT' })}.${enc(payload)}.`;
}

export function idempotencyKey(): string {
  return `key-${randomBytes(12).toString('hex')}`;
}

import { createSecretKey, type KeyObject } from 'node:crypto';
import jwt from 'jsonwebtoken';
import { z } from 'zod';
import { Unauthorized } from '../../core/errors.js';
import type { Identity } from '../../core/identity.js';
import { idSchema } from '../../core/ids.js';

// The bound matters: a 19-digit sub above 2^63-1 reached the users lookup and PostgreSQL answered
// "bigint out of range" (a 500) instead of a 401.
export const userIdSchema = idSchema;
export const tenantIdSchema = z.string().regex(/^[A-Za-z0-9_-]{1,36}$/);

const claimsSchema = z.object({
  sub: userIdSchema,
  tid: tenantIdSchema,
  role: z.enum(['admin', 'user']),
  exp: z.number().int(),
});

/**
 * The HMAC key as a KeyObject, made once per secret. Given a string, jsonwebtoken first tries to
 * parse it as a public key (and fails) on every call: a quarter of the service's CPU per request
 * in the benchmark profile (docs/BENCHMARKS.md).
 */
const keyCache = new Map<string, KeyObject>();
function hmacKey(secret: string): KeyObject {
  let key = keyCache.get(secret);
  if (!key) {
    key = createSecretKey(Buffer.from(secret, 'utf8'));
    keyCache.set(secret, key);
  }
  return key;
}

export type { Identity };

export function signToken(
  secret: string,
  identity: Identity,
  ttlSeconds: number,
): { token: string; expiresAt: Date } {
  const exp = Math.floor(Date.now() / 1000) + ttlSeconds;
  const token = jwt.sign(
    { sub: identity.userId, tid: identity.tenantId, role: identity.role, exp },
    hmacKey(secret),
    {
      algorithm: 'HS256',
    },
  );
  return { token, expiresAt: new Date(exp * 1000) };
}

/**
 * Tokens this process has verified, by secret and then by the token's exact text, until their `exp`:
 * a client sends the same token with every request, and checking its signature again each time
 * (base64, JSON, HMAC: about 11 µs here) is about 2% of a create's CPU. A hit is the same bytes checked before with
 * the same key, so it answers exactly what verifying again would while `exp` lies ahead (a failed
 * verification is never kept). Bounded: forgotten wholesale at 10,000 tokens.
 */
const verified = new Map<string, Map<string, { identity: Readonly<Identity>; exp: number }>>();
const VERIFIED_MAX = 10_000;

/** Verifies `Authorization: Bearer <JWT>`: HS256 only (so `alg: none` fails), `exp` required. */
export function verifyBearer(secret: string, header: string | undefined): Identity {
  if (!header) throw new Unauthorized('Authentication required');
  // The scheme is case-insensitive (RFC 9110 section 11.1): `bearer` and `BEARER` are Bearer.
  const match = /^Bearer ([A-Za-z0-9_.-]+)$/i.exec(header);
  if (!match) throw new Unauthorized('Malformed Authorization header');
  const token = match[1];
  let known = verified.get(secret);
  const hit = known?.get(token);
  // jsonwebtoken's own rule: expired once the current second reaches `exp`.
  if (hit && Math.floor(Date.now() / 1000) < hit.exp) return hit.identity;
  let payload: unknown;
  try {
    payload = jwt.verify(token, hmacKey(secret), { algorithms: ['HS256'] });
  } catch (err) {
    throw new Unauthorized(err instanceof jwt.TokenExpiredError ? 'Token expired' : 'Invalid token');
  }
  const claims = claimsSchema.safeParse(payload);
  if (!claims.success) throw new Unauthorized('Invalid token claims');
  const identity = Object.freeze({
    userId: claims.data.sub,
    tenantId: claims.data.tid,
    role: claims.data.role,
  });
  if (!known) {
    known = new Map();
    verified.set(secret, known);
  }
  if (known.size >= VERIFIED_MAX) known.clear();
  known.set(token, { identity, exp: claims.data.exp });
  return identity;
}

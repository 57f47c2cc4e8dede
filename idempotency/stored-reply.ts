import { z } from 'zod';
import type { Reply } from './outcome.js';
import type { ResponseCipher } from './response-cipher.js';

/** The stored form (short keys: it is encrypted and kept for every record until it expires). */
const storedSchema = z.object({
  s: z.number().int(),
  h: z.record(z.string(), z.string()),
  b: z.unknown().optional(),
});

/** Encrypts a reply for the record of `scopeKey` (the scope key is the associated data). */
export function sealReply(cipher: ResponseCipher, scopeKey: string, reply: Reply): string {
  return cipher.encrypt(JSON.stringify({ s: reply.status, h: reply.headers, b: reply.body }), scopeKey);
}

/** The reply stored with a record; throws when it cannot be decrypted or is not a stored reply. */
export function openReply(cipher: ResponseCipher, scopeKey: string, stored: string): Reply {
  const { s, h, b } = storedSchema.parse(JSON.parse(cipher.decrypt(stored, scopeKey)));
  return { status: s, headers: h, body: b };
}

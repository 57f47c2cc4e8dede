import type { Reply } from './outcome.js';
import type { ResponseCipher } from './response-cipher.js';

/** The stored form (short keys: it is encrypted and kept for every record until it expires). */
interface Stored {
  s: number;
  h: Record<string, string>;
  b?: unknown;
}

/** A reply read back from its record, with its body also as the exact JSON text it was stored as. */
export interface OpenedReply extends Reply {
  /** The body's JSON text as sealed (absent without a body): a replay can send it as it is. */
  bodyJson?: string;
}

/** Encrypts a reply for the record of `scopeKey` (the scope key is the associated data). */
export function sealReply(cipher: ResponseCipher, scopeKey: string, reply: Reply): string {
  return cipher.encrypt(JSON.stringify({ s: reply.status, h: reply.headers, b: reply.body }), scopeKey);
}

/** The reply stored with a record; throws when it cannot be decrypted or is not a stored reply. */
export function openReply(cipher: ResponseCipher, scopeKey: string, stored: string): OpenedReply {
  const text = cipher.decrypt(stored, scopeKey);
  const value: unknown = JSON.parse(text);
  if (!isStored(value)) throw new Error('the decrypted record is not a stored reply');
  const reply: OpenedReply = { status: value.s, headers: value.h, body: value.b };
  if (value.b !== undefined) reply.bodyJson = bodyJson(text, value);
  return reply;
}

/** The body's JSON text of a reply opened by openReply, when it has one (else undefined). */
export function storedBodyJson(reply: Reply): string | undefined {
  const json = (reply as OpenedReply).bodyJson;
  return typeof json === 'string' ? json : undefined;
}

/**
 * The body as sealed: `{"s":…,"h":{…},"b":<body>}` with `b` last (sealReply's key order), so the
 * body is what follows the head re-serialised from its parsed values; sliced, not serialised again.
 * Any other form (none is written) is serialised from the parsed body: the same text, since
 * JSON.stringify of what JSON.parse read from JSON.stringify's output gives the same bytes.
 */
function bodyJson(text: string, value: Stored): string {
  const head = `${JSON.stringify({ s: value.s, h: value.h }).slice(0, -1)},"b":`;
  return text.startsWith(head) && text.endsWith('}') ? text.slice(head.length, -1) : JSON.stringify(value.b);
}

/** Checked by hand rather than by a schema: it runs on every replay, and the form is this small. */
function isStored(value: unknown): value is Stored {
  if (typeof value !== 'object' || value === null) return false;
  const { s, h } = value as Partial<Stored>;
  return (
    Number.isInteger(s) &&
    typeof h === 'object' &&
    h !== null &&
    !Array.isArray(h) &&
    Object.values(h).every((v) => typeof v === 'string')
  );
}

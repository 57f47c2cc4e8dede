import type { Reply } from './outcome.js';
import type { ResponseCipher } from './response-cipher.js';
import { type OpenedReply, openReply } from './stored-reply.js';

/**
 * How many opened replies a process keeps, and how many bytes of heap they may take (estimated per
 * entry as below; a user's create answer takes about 1.5 KB, so about 5,000 of them fit).
 */
export const OPENED_REPLIES_MAX = 10_000;
export const OPENED_REPLIES_MAX_BYTES = 8 * 1024 * 1024;

interface Entry {
  /** The sealed text the reply was opened from: a hit must match it exactly. */
  sealed: string;
  /** The reply as a replay sends it (the stored one, marked `Idempotent-Replayed`), frozen. */
  replayed: OpenedReply;
  bytes: number;
}

/**
 * Replies this process opened lately, by scope key, so that the next replay of the same record skips
 * the decryption and the parse (together about a tenth of a replay's CPU in the service: the cipher's
 * set-up, base64, JSON.parse and the body's slice). A hit needs the record's sealed text to be the
 * one opened, character for character: AES-GCM authenticates it, so the same text opens to the same
 * reply, and a record written again for the key (purged, claimed anew) has another IV, hence another
 * text. The database is still read on every replay (the user row's rule, the record's status, expiry
 * and fingerprint are judged as before); only the decryption of what it returned is kept.
 *
 * What is kept is what a replay sends anyway: a stored answer never holds a secret (CONTRACT section
 * 5). Entries are frozen, body included, because every replay of the key shares them: an attempt to
 * change one throws instead of leaking into another request's answer. Bounded by count and by size;
 * the oldest go first.
 */
export class OpenedReplies {
  private readonly entries = new Map<string, Entry>();
  private bytes = 0;

  constructor(
    private readonly cipher: ResponseCipher,
    private readonly max = OPENED_REPLIES_MAX,
    private readonly maxBytes = OPENED_REPLIES_MAX_BYTES,
  ) {}

  /**
   * The reply sealed in `sealed` for `scopeKey`, marked as a replay (throws as openReply does when it
   * cannot be opened; nothing is kept then).
   */
  replayed(scopeKey: string, sealed: string): Reply {
    const hit = this.entries.get(scopeKey);
    if (hit && hit.sealed === sealed) return hit.replayed;
    const opened = openReply(this.cipher, scopeKey, sealed);
    const replayed: OpenedReply = {
      ...opened,
      headers: { ...opened.headers, 'Idempotent-Replayed': 'true' },
    };
    this.keep(scopeKey, sealed, deepFreeze(replayed));
    return replayed;
  }

  /** How many replies are kept (for tests). */
  get size(): number {
    return this.entries.size;
  }

  /** The heap the kept replies take, as estimated against the bound (for tests). */
  get bytesKept(): number {
    return this.bytes;
  }

  private keep(scopeKey: string, sealed: string, replayed: OpenedReply): void {
    // Held to V8's heap by test/unit/opened-replies.test.ts: the two strings at a byte a character
    // (their text is ASCII), the body's text and its parsed objects about three times its length
    // (up to twice that for a body with non-ASCII text, kept two bytes a character), and the
    // entry's own objects.
    const body = replayed.bodyJson?.length ?? sealed.length;
    const bytes = scopeKey.length + sealed.length + 3 * body + 200;
    if (bytes > this.maxBytes) return;
    this.drop(scopeKey);
    this.entries.set(scopeKey, { sealed, replayed, bytes });
    this.bytes += bytes;
    while (this.entries.size > this.max || this.bytes > this.maxBytes) {
      const oldest = this.entries.keys().next().value;
      if (oldest === undefined) break;
      this.drop(oldest);
    }
  }

  private drop(scopeKey: string): void {
    const entry = this.entries.get(scopeKey);
    if (!entry) return;
    this.entries.delete(scopeKey);
    this.bytes -= entry.bytes;
  }
}

function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null && !Object.isFrozen(value)) {
    for (const member of Object.values(value)) deepFreeze(member);
    Object.freeze(value);
  }
  return value;
}

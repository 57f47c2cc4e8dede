import type { Reply } from './outcome.js';
import type { ResponseCipher } from './response-cipher.js';
import { type OpenedReply, openReply } from './stored-reply.js';

/** How many opened replies a process keeps, and how many characters of them at most. */
export const OPENED_REPLIES_MAX = 10_000;
export const OPENED_REPLIES_MAX_CHARS = 4_000_000;

interface Entry {
  /** The sealed text the reply was opened from: a hit must match it exactly. */
  sealed: string;
  /** The reply as a replay sends it (the stored one, marked `Idempotent-Replayed`), frozen. */
  replayed: OpenedReply;
  chars: number;
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
  private chars = 0;

  constructor(
    private readonly cipher: ResponseCipher,
    private readonly max = OPENED_REPLIES_MAX,
    private readonly maxChars = OPENED_REPLIES_MAX_CHARS,
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

  private keep(scopeKey: string, sealed: string, replayed: OpenedReply): void {
    // The sealed text, and twice what it opens to (the body's text and its parsed objects).
    const chars = scopeKey.length + sealed.length + 2 * (replayed.bodyJson?.length ?? sealed.length);
    if (chars > this.maxChars) return;
    this.drop(scopeKey);
    this.entries.set(scopeKey, { sealed, replayed, chars });
    this.chars += chars;
    while (this.entries.size > this.max || this.chars > this.maxChars) {
      const oldest = this.entries.keys().next().value;
      if (oldest === undefined) break;
      this.drop(oldest);
    }
  }

  private drop(scopeKey: string): void {
    const entry = this.entries.get(scopeKey);
    if (!entry) return;
    this.entries.delete(scopeKey);
    this.chars -= entry.chars;
  }
}

function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null && !Object.isFrozen(value)) {
    for (const member of Object.values(value)) deepFreeze(member);
    Object.freeze(value);
  }
  return value;
}

/** How many keys a process remembers (each a scope key, under 200 bytes). */
export const RECENT_KEYS_MAX = 10_000;

/**
 * Scope keys this process has lately seen a record of (it executed the request, or answered a
 * duplicate from the record): a hint, never a source of truth, for choosing the cheaper path of a
 * keyed create. A retry of such a key is most likely a replay, which the auth read answers in its one
 * round trip without building the create (engine.ts runAtOnce sends the whole create, sealed answer
 * included, before it knows). A stale or evicted entry only changes which path answers, not the
 * answer. Bounded: the oldest entries go first, past `max`.
 */
export class RecentKeys {
  private readonly keys = new Set<string>();

  constructor(private readonly max = RECENT_KEYS_MAX) {}

  add(scopeKey: string): void {
    if (this.keys.has(scopeKey)) return;
    this.keys.add(scopeKey);
    if (this.keys.size > this.max) {
      const oldest = this.keys.values().next().value;
      if (oldest !== undefined) this.keys.delete(oldest);
    }
  }

  has(scopeKey: string): boolean {
    return this.keys.has(scopeKey);
  }
}

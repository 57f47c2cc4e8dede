import type { IdempotencyEngine } from '../idempotency/engine.js';

/**
 * The three paths of a keyed create (users.create, orders.create). Each gives the same answer; they
 * differ only in round trips to PostgreSQL (counted with the user's cap rows already in place).
 */
export type KeyedPath = 'one-statement' | 'replay-read-first' | 'read-first' | 'general';

/**
 * Which path a keyed create takes: the one place this is decided. `ctx.userCheckInWrite` says
 * whether authentication read the user row (routers/trpc.ts authedProcedure decides that from the
 * token and the procedure's meta, before the key is admitted).
 */
export function chooseKeyedPath(
  ctx: {
    userCheckInWrite?: boolean;
    services: { idempotency: Pick<IdempotencyEngine, 'recent' | 'atOnceSupported'> };
  },
  scopeKey: string,
  slowStatement: boolean,
): KeyedPath {
  // Authentication already read the user row and the key's record, and took the new row's id, in
  // its one round trip (a token whose role the write cannot check, such as a user's token on an
  // admin-only create, or a malformed key): that read answers a replay (1 round trip in all); a new
  // key's claim, write and final record then go together (2 in all).
  if (!ctx.userCheckInWrite) return 'general';
  const { idempotency } = ctx.services;
  // A key this process saw a record of lately (idempotency/recent-keys.ts), most likely a replay:
  // the same read first, here, then as 'general' (a replay 1 round trip, without building and
  // sealing the whole create the one statement would send). The read takes no new id: a replay
  // needs none (when the record is gone after all, the general path writes without one, 3 round
  // trips instead of 2).
  if (idempotency.recent.has(scopeKey)) return 'replay-read-first';
  // The one statement cannot run now (a Redis placeholder, or a failpoint between claim and commit
  // armed), or the statement has a slow step for this input (a password to hash, users.create, so
  // that a replay, a 40901 or a refused user row never pays for it: a round trip against scrypt):
  // the same read first, which also takes the new row's id when the key has no record.
  if (slowStatement || !idempotency.atOnceSupported()) return 'read-first';
  // Most likely a new key: the user row's rule, the record's read, the claim in its final state and
  // the business INSERT as one statement, 1 round trip in all (idempotency/engine.ts runAtOnce).
  // What it leaves undecided (a failed INSERT, an expired record, a lost claim) goes on as
  // 'read-first' does.
  return 'one-statement';
}

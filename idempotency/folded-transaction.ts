import { type Sequelize, Transaction } from 'sequelize';
import type { Ending } from '../core/database.js';
import { sqlRows } from '../core/sql.js';

/**
 * A Mode A transaction whose edges travel with the engine's own statements. Sequelize sends START
 * TRANSACTION as a round trip of its own when a transaction opens, and COMMIT as another; the
 * engine's first statement (the claim) and last (the record's final state) are its own SQL anyway,
 * so here BEGIN is the first statement of the claim's string and COMMIT the last of the final
 * update's: two round trips fewer per keyed create. Everything between (model calls with
 * `{ transaction }`, savepoints, rollback, the connection) is Sequelize's own.
 *
 * The caller must send `BEGIN` in its first statement (before that the connection is in no
 * transaction; a rollback then is a harmless no-op with a warning).
 */
export class FoldedTransaction extends Transaction {
  // Sequelize 6's own members (node_modules/sequelize/lib/transaction.js), left out of its type
  // declarations: set by its constructor, prepareEnvironment (takes a pooled connection, then calls
  // begin()), cleanup (gives the connection back), finished (set by commit() and rollback()).
  declare private readonly sequelize: Sequelize;
  declare private prepareEnvironment: (useCLS: boolean) => Promise<void>;
  declare private cleanup: () => void;
  declare private finished?: string;

  /** A pooled connection, and no statement yet: the caller's first one starts with `BEGIN;`. */
  static async open(sequelize: Sequelize): Promise<FoldedTransaction> {
    const t = new FoldedTransaction(sequelize, {});
    await t.prepareEnvironment(false);
    return t;
  }

  /** Called by prepareEnvironment: sends nothing (BEGIN goes with the first statement). */
  begin(): Promise<void> {
    return Promise.resolve();
  }

  /**
   * The round trip just sent ended with its own COMMIT (and ran to its end: no error came back): the
   * transaction is over, and its connection goes back to the pool with nothing more to send.
   */
  committedInline(): void {
    if (this.finished) throw new Error(`Transaction cannot be committed: already ${this.finished}`);
    this.finished = 'commit';
    this.cleanup();
  }

  /**
   * The transaction's last statements and COMMIT in one round trip (a simple query: its values must
   * be escaped literals). On an error nothing is marked: the caller rolls back, as after a failed
   * commit (which may have committed: the record then says what happened).
   */
  async commitWith(sql: string): Promise<void> {
    if (this.finished) throw new Error(`Transaction cannot be committed: already ${this.finished}`);
    await sqlRows(this.sequelize, `${sql}\nCOMMIT;`, undefined, this);
    this.finished = 'commit';
    this.cleanup();
  }
}

/** How a folded transaction's work ends: as `Ending`, or with its last statements sent with COMMIT. */
export type FoldedEnding<T> = Ending<T> | { commitWith: string; value: T };

/**
 * core/database.ts `inTransaction` for a folded transaction: the work's first statement must start
 * with BEGIN; it ends by its result, and `commitWith` sends its last statements and COMMIT as one
 * round trip. A thrown error, or a failed final round trip, rolls back. A final round trip (the one
 * with COMMIT) that failed may have committed all the same (its answer lost with the connection):
 * `unacknowledged`, when given, is asked what to return instead of its error (undefined: the error).
 */
export async function inFoldedTransaction<T>(
  sequelize: Sequelize,
  work: (t: FoldedTransaction) => Promise<FoldedEnding<T>>,
  unacknowledged?: (value: T, err: unknown) => T | undefined,
): Promise<T> {
  const t = await FoldedTransaction.open(sequelize);
  let ending: FoldedEnding<T>;
  try {
    ending = await work(t);
    if ('rollback' in ending) {
      await t.rollback();
      return ending.rollback;
    }
  } catch (err) {
    await t.rollback().catch(() => {});
    throw err;
  }
  const value = 'commitWith' in ending ? ending.value : ending.commit;
  try {
    if ('commitWith' in ending) await t.commitWith(ending.commitWith);
    else await t.commit();
    return value;
  } catch (err) {
    await t.rollback().catch(() => {});
    const instead = unacknowledged?.(value, err);
    if (instead === undefined) throw err;
    return instead;
  }
}

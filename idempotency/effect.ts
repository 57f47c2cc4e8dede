// An effect: an operation whose work leaves our database (a charge, a refund, a message to a partner)
// and so cannot be rolled back with a transaction (DESIGN "Mode B" and "Effects: Mode B as a
// capability"). A definition says only what is its own: its row, its downstream key, its business
// checks, the downstream call and query, its finalise and its answer. The rest (claim and caps, lease
// and owner token, takeover, resume, query first, bounded waits, the recoverer's sweep, failpoints)
// is written once, in effect-*.ts, for every effect.
import type { Sequelize, Transaction } from 'sequelize';
import type { Config } from '../core/config.js';
import type { DomainError } from '../core/errors.js';
import { type FailpointName, failpoint } from '../core/failpoints.js';
import type { IdempotencyEngine } from './engine.js';
import type { FoldedTransaction } from './folded-transaction.js';
import type { Lease } from './lease.js';
import type { Reply } from './outcome.js';

/** What every effect's steps use: the database and the engine (its lease store and answers). */
export interface EffectDeps {
  sequelize: Sequelize;
  engine: IdempotencyEngine;
  /** Counts how each attempt of an effect ended (final, pending, not_done, fenced): a metric in server/. */
  onSettled?: (effect: string, settlement: 'final' | 'pending' | 'not_done' | 'fenced') => void;
}

/**
 * The resource row of an effect. Its table has `id`, `status` ('PROCESSING' until finalised),
 * `resumable_since` (set while its last attempt certainly did nothing downstream) and `updated_at`:
 * the mechanism's resume and mark are written once against these columns.
 */
export interface EffectRow {
  id: string;
  status: string;
  resumableSince?: Date | null;
}

/** What the downstream did with the key: done (with its result), certainly not done, or unknown. */
export type Downstream<R> = { kind: 'done'; result: R } | { kind: 'not_done' } | { kind: 'unknown' };

export type Prepared<Row> =
  /** A new resource, not yet written: `insert` (text, escaped literals) rides with Tx 1's COMMIT. */
  | { kind: 'new'; row: Row; insert: string }
  /** The business key has its resource already: its answer (final), or it is in flight/resumable. */
  | { kind: 'existing'; row: Row }
  /** The business checks refused: stored as FAILED_FINAL with this error. */
  | { kind: 'refused'; error: DomainError };

/**
 * A read that rides at the end of Tx 1's claim round trip and admits the request before anything the
 * claim found is acted on (routers/: the caller's user row, which would otherwise be a round trip of
 * its own before the claim). `admit` judges its rows and gives the request to go on with (the row may
 * change the caller's role), or throws the refusal (the transaction rolls back: nothing is kept).
 * When the round trip failed before the read ran (the claim's lock wait ended, a tombstoned key),
 * `admitAlone` reads and judges on its own, so that the refusal still ranks first.
 */
export interface Gate<In> {
  /** One read-only statement, as text (escaped literals). */
  statement: string;
  admit(rows: unknown[], request: In): In;
  admitAlone(request: In): Promise<In>;
}

/** The boundaries between steps, each a place a test can crash, stall or fail the process. */
export type Step =
  | 'tx1.before-commit'
  | 'tx1.after-commit'
  | 'perform.before'
  | 'perform.after'
  | 'tx2.before'
  | 'tx2.after'
  | 'takeover'
  | 'resume'
  | 'recoverer.takeover';

export interface Effect<D extends EffectDeps, In, Row extends EffectRow, R> {
  /** The operation name of its idempotency records (what the recoverer sweeps). */
  name: string;
  /** The resource table (columns: see EffectRow). */
  table: string;
  /** Who is downstream, as a 503 names it ("Payment gateway"). */
  downstream: string;
  /** The failpoint of each step boundary; a step without one is not a failpoint of this effect. */
  failpoints: Partial<Record<Step, FailpointName>>;
  /**
   * A statement (text, escaped literals) that rides in Tx 1's claim round trip, after the claim,
   * whatever its outcome: read-only, or writing (locking) only under this key's claim (`scopeKey`,
   * idempotency/caps.ts claimedGuard). A lock wait it ends by lock_timeout is the request's error
   * (503), not the key's claim in flight (202).
   */
  lookup?(request: In, scopeKey: string): string;
  /** Tx 1, after our claim: the business checks on `found` (the lookup's rows); may lock or read more. */
  prepare(t: Transaction, found: unknown[], request: In): Promise<Prepared<Row>> | Prepared<Row>;
  /** The resource row as it stands (inside `t` when given). */
  read(id: string, t?: Transaction): Promise<Row | undefined>;
  /** The downstream call with the row's downstream key, outside any transaction. */
  perform(deps: D, row: Row, signal: AbortSignal): Promise<Downstream<R>>;
  /** What the downstream knows of the row's key. */
  query(deps: D, row: Row): Promise<Downstream<R>>;
  /**
   * Tx 2, fenced on the lease's owner token (the record's update decides, the row's writes happen
   * only if it did): the stored reply, or undefined when fenced off (someone took over).
   */
  finalise(deps: D, lease: Lease, row: Row, result: R): Promise<Reply | undefined>;
  /** The answer of a final row. */
  answer(row: Row): Reply;
  /**
   * Set when nothing but the resource's own Idempotency-Key can resume it (refunds: each key is its
   * own refund, CONTRACT section 10). Once that key has expired (40905), a resumable resource could
   * never finish and would hold for ever what it reserves (a refund's amount against the payment's
   * cap), so the recoverer closes it, query first (effect-expire.ts): FAILED with this
   * `failureReason`. Its table also has `failure_reason` and `created_at`. Unset (payments): a new
   * key for the same business key resumes the resource however old it is (CONTRACT section 3).
   */
  closedOnKeyExpiry?: {
    failureReason: string;
    /** The key's time to live: what the route writes its records with (routers/ ttlHours). */
    ttlHours(config: Config): number;
  };
}

// biome-ignore lint/suspicious/noExplicitAny: a registry holds effects of every input and result type
export type AnyEffect = Effect<any, any, any, any>;

const registered = new Map<string, AnyEffect>();

/** Declares an effect and registers it under its operation name (the recoverer sweeps them all). */
export function defineEffect<D extends EffectDeps, In, Row extends EffectRow, R>(
  effect: Effect<D, In, Row, R>,
): Effect<D, In, Row, R> {
  // The table name is written into the mechanism's statements: only a plain identifier is accepted.
  if (!/^[a-z_][a-z0-9_]*$/.test(effect.table)) throw new Error(`not a table name: ${effect.table}`);
  registered.set(effect.name, effect);
  return effect;
}

/** Every effect defined in this process. */
export const registeredEffects = (): AnyEffect[] => [...registered.values()];

/** The step boundary's failpoint, when the effect has one there. */
export async function stepBoundary(effect: AnyEffect, step: Step): Promise<void> {
  const name = effect.failpoints[step];
  if (name) await failpoint(name);
}

export type { FoldedTransaction, Lease };

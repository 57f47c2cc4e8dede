import { randomBytes } from 'node:crypto';
import { QueryTypes, type Sequelize, type Transaction } from 'sequelize';
import { sqlLiteral, sqlRows } from '../core/sql.js';
import { type Cap, runClaim, takeSlot } from './caps.js';
import type { FoldedTransaction } from './folded-transaction.js';
import type { Reply } from './outcome.js';
import type { ClaimRequest, Limits } from './record-store.js';
import type { ResponseCipher } from './response-cipher.js';
import { sealReply } from './stored-reply.js';

/** The right to finish one record: its scope key and the unguessable token of its current owner. */
export interface Lease {
  scopeKey: string;
  owner: string;
  /**
   * When the lease ends, by this process's clock (ms since the epoch): taken just before the statement
   * that set it, so never later than the database's lease_until. What a 202's Retry-After counts down.
   */
  until: number;
}

export interface ExpiredLease {
  scopeKey: string;
  ownerToken: string | null;
  resourceId: string | null;
}

/**
 * Mode B: the record is committed as PROCESSING before the external call, owned by an unguessable
 * owner token until lease_until. Every later write is conditional on the owner token (fencing): an
 * executor whose lease was taken over can never write a final state.
 */
export class LeaseStore {
  constructor(
    private readonly sequelize: Sequelize,
    private readonly cipher: ResponseCipher,
    private readonly leaseMs: number,
    private readonly limits: Limits,
  ) {}

  /**
   * Tx 1: inserts the PROCESSING record with a fresh lease and takes an in-flight slot as its holder
   * (caps.ts); or says which cap refused (null: a record of this key is there). `alongside`, one
   * read-only statement as text (escaped literals), runs after the claim in the same round trip,
   * whatever the claim's outcome; its rows come back with the lease. `gate`, one more, ends the round
   * trip; its rows come back whatever the outcome (`gated`; absent when the claim's round trip failed
   * before it ran). `lockBudgetMs`: the transaction's lock_timeout, when the request has less than the
   * session's whole wait bound left (engine.ts claimLockBudgetMs).
   */
  async claim(
    t: FoldedTransaction,
    req: ClaimRequest,
    alongside?: string,
    gate?: string,
    lockBudgetMs?: number,
  ): Promise<({ lease: Lease; alongside: unknown[] } | { cap: Cap | null }) & { gated?: unknown[] }> {
    const owner = newOwnerToken();
    const until = Date.now() + this.leaseMs;
    // The transaction's BEGIN rides with the claim (folded-transaction.ts).
    const result = await runClaim(
      this.sequelize,
      t,
      {
        scopeKey: req.scopeKey,
        requestHash: req.requestHash,
        userScope: req.userScope,
        operation: req.operation,
        ttlSeconds: req.ttlHours * 3600,
        maxInFlight: this.limits.maxInFlight,
        maxRetained: this.limits.maxRetained,
        fieldHashes: req.fieldHashes,
        lease: { owner, seconds: this.leaseMs / 1000 },
      },
      {
        first:
          lockBudgetMs === undefined
            ? 'BEGIN;'
            : `BEGIN; SET LOCAL lock_timeout = '${Math.max(1, Math.floor(lockBudgetMs))}ms';`,
        after: alongside,
        last: gate,
      },
    );
    const gated = result.last;
    return result.claimed
      ? { lease: { scopeKey: req.scopeKey, owner, until }, alongside: alongside ? result.after : [], gated }
      : { cap: result.cap, gated };
  }

  /** A resume makes a FAILED_RETRYABLE record PROCESSING again: it needs an in-flight slot too. */
  takeSlot(t: Transaction, userScope: string, scopeKey: string): Promise<boolean> {
    return takeSlot(this.sequelize, t, userScope, scopeKey, this.limits.maxInFlight);
  }

  /**
   * Tx 1's last statement as text (escaped literals), to be sent with its COMMIT: the record points
   * at the new resource (so a takeover finds it).
   */
  attachResourceStatement(lease: Lease, resourceId: string): string {
    const lit = sqlLiteral;
    return `UPDATE idempotency_records SET resource_id = ${lit(resourceId)}
     WHERE scope_key = ${lit(lease.scopeKey)} AND owner_token = ${lit(lease.owner)};`;
  }

  /** Tx 1: the record points at the resource it is about (so a takeover finds it). */
  async attachResource(t: Transaction, lease: Lease, resourceId: string): Promise<void> {
    await this.sequelize.query(
      'UPDATE idempotency_records SET resource_id = $3 WHERE scope_key = $1 AND owner_token = $2',
      { bind: [lease.scopeKey, lease.owner, resourceId], transaction: t },
    );
  }

  /** Tx 2: the final state and its stored reply, only if we still own the lease. false = fenced off. */
  async finish(
    t: Transaction,
    lease: Lease,
    status: 'SUCCEEDED' | 'FAILED_FINAL',
    reply: Reply,
  ): Promise<boolean> {
    const parts = this.finishParts(lease, status, reply);
    const rows = await this.sequelize.query<{ n: string }>(`WITH ${parts.ctes} ${parts.select}`, {
      bind: parts.bind,
      transaction: t,
      type: QueryTypes.SELECT,
    });
    return Number(rows[0]?.n) === 1;
  }

  /**
   * `finish` as parts of one statement, for a caller whose own writes must happen only if the
   * record is still ours, in the same round trip and without a transaction (one statement is atomic):
   * the record's CTEs (`done`, one row when the lease was ours; `freed`, its slot given back) with
   * binds $1..$5, and the SELECT of `n` (1: finished, 0: fenced off). The caller adds CTEs that
   * write only `WHERE EXISTS (SELECT 1 FROM done)`, with binds from $6.
   */
  finishParts(
    lease: Lease,
    status: 'SUCCEEDED' | 'FAILED_FINAL',
    reply: Reply,
  ): { ctes: string; select: string; bind: unknown[] } {
    return {
      ctes: `${leaveProcessingCtes(`UPDATE idempotency_records SET status = $3, http_status = $4, response_body = $5, owner_token = NULL,
              lease_until = NULL, updated_at = now()
       WHERE scope_key = $1 AND owner_token = $2 AND status = 'PROCESSING' RETURNING user_scope`)}`,
      select: 'SELECT (SELECT count(*) FROM done) AS n',
      bind: [
        lease.scopeKey,
        lease.owner,
        status,
        reply.status,
        sealReply(this.cipher, lease.scopeKey, reply),
      ],
    };
  }

  /**
   * An effect's Tx 2 as one statement, without a transaction (one statement is atomic, one round
   * trip): the SQL function `fn` takes the record's binds as finishParts makes them ($1..$5: scope
   * key, owner, status, HTTP status, sealed reply), then `args`, finishes the record with the reply
   * and writes the effect's rows only if that happened (it returns 1; 0: fenced off, nothing written).
   */
  async finishWith(lease: Lease, reply: Reply, fn: string, args: readonly unknown[]): Promise<boolean> {
    if (!/^[a-z_][a-z0-9_]*$/.test(fn)) throw new Error(`finishWith: not a function name: ${fn}`);
    const bind = [...this.finishParts(lease, 'SUCCEEDED', reply).bind, ...args];
    const params = bind.map((_, i) => `$${i + 1}`).join(', ');
    const rows = await sqlRows<{ n: number }>(this.sequelize, `SELECT ${fn}(${params}) AS n`, bind);
    return Number(rows[0]?.n) === 1;
  }

  /**
   * Takeover with exactly one winner: the condition names the previous owner and requires its lease
   * to have ended (or the record to be FAILED_RETRYABLE, which has no owner). Returns the new lease,
   * or undefined when someone else won or the record moved on.
   */
  async takeOver(
    scopeKey: string,
    previousOwner: string | null,
    t?: Transaction,
  ): Promise<Lease | undefined> {
    const owner = newOwnerToken();
    const until = Date.now() + this.leaseMs;
    const [, count] = await this.sequelize.query(
      `UPDATE idempotency_records SET owner_token = $2, lease_until = now() + make_interval(secs => $3::float8),
              status = 'PROCESSING', updated_at = now()
       WHERE scope_key = $1 AND owner_token IS NOT DISTINCT FROM $4
         AND ((status = 'PROCESSING' AND lease_until < now()) OR status = 'FAILED_RETRYABLE')`,
      {
        bind: [scopeKey, owner, this.leaseMs / 1000, previousOwner],
        type: QueryTypes.UPDATE,
        transaction: t,
      },
    );
    return count === 1 ? { scopeKey, owner, until } : undefined;
  }

  /**
   * A FAILED_RETRYABLE record whose resource became final through another record (a resume with
   * another key): it takes the final reply, so its own key replays it from now on. false: the record
   * moved on meanwhile.
   */
  async finishRetryable(t: Transaction, scopeKey: string, reply: Reply): Promise<boolean> {
    const [, updated] = await this.sequelize.query(
      `UPDATE idempotency_records SET status = 'SUCCEEDED', http_status = $2, response_body = $3, updated_at = now()
       WHERE scope_key = $1 AND status = 'FAILED_RETRYABLE'`,
      {
        bind: [scopeKey, reply.status, sealReply(this.cipher, scopeKey, reply)],
        transaction: t,
        type: QueryTypes.UPDATE,
      },
    );
    return updated === 1;
  }

  /**
   * Certainly not executed downstream (refused, 5xx): a retry with the same key may execute again.
   * false: fenced off (someone took the lease over and owns the outcome now).
   */
  async markRetryable(lease: Lease, t?: Transaction): Promise<boolean> {
    const rows = await this.sequelize.query<{ n: string }>(
      leaveProcessing(`UPDATE idempotency_records SET status = 'FAILED_RETRYABLE', owner_token = NULL, lease_until = NULL,
              updated_at = now()
       WHERE scope_key = $1 AND owner_token = $2 AND status = 'PROCESSING' RETURNING user_scope`),
      { bind: [lease.scopeKey, lease.owner], transaction: t, type: QueryTypes.SELECT },
    );
    return Number(rows[0]?.n) === 1;
  }

  /**
   * Outcome still unknown and we stop working on it: end our lease now (the record stays PROCESSING)
   * so that the next retry or the recoverer can take over at once, query first, and finish.
   */
  async release(lease: Lease): Promise<void> {
    await this.sequelize.query(
      `UPDATE idempotency_records SET lease_until = now() - interval '1 millisecond', updated_at = now()
       WHERE scope_key = $1 AND owner_token = $2 AND status = 'PROCESSING'`,
      { bind: [lease.scopeKey, lease.owner] },
    );
  }

  /** PROCESSING records of an operation whose lease has ended (their executor died or gave up). */
  findExpired(operation: string, limit: number): Promise<ExpiredLease[]> {
    return this.sequelize.query<ExpiredLease>(
      `SELECT scope_key AS "scopeKey", owner_token AS "ownerToken", resource_id AS "resourceId" FROM idempotency_records
       WHERE status = 'PROCESSING' AND lease_until < now() AND operation = $1 ORDER BY lease_until LIMIT $2`,
      { bind: [operation, limit], type: QueryTypes.SELECT },
    );
  }
}

/**
 * A record leaves PROCESSING (`update` names it as $1 and returns its user_scope): in the same
 * statement its in-flight slot is given back (holder cleared), so the slot row itself says it is
 * free. Returns how many records were updated (0: fenced off).
 */
function leaveProcessing(update: string): string {
  return `WITH ${leaveProcessingCtes(update)}
  SELECT (SELECT count(*) FROM done) AS n, (SELECT count(*) FROM freed) AS freed`;
}

/** The CTEs of `leaveProcessing`: `done` (the update, returning user_scope) and `freed` (its slot). */
function leaveProcessingCtes(update: string): string {
  return `done AS (${update}),
  freed AS (UPDATE idempotency_slots s SET holder = NULL FROM done
            WHERE s.user_scope = done.user_scope AND s.holder = $1 RETURNING 1)`;
}

export function newOwnerToken(): string {
  return randomBytes(32).toString('hex');
}

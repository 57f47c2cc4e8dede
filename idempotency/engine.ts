import { setTimeout as sleep } from 'node:timers/promises';
import type { TRPCError } from '@trpc/server';
import type { Logger } from 'pino';
import type { Sequelize, Transaction } from 'sequelize';
import type { Config } from '../core/config.js';
import {
  Conflict,
  ConflictCode,
  type Envelope,
  ReplayedError,
  ServiceUnavailable,
  TooManyRequests,
  toErrorResponse,
  toTrpcError,
} from '../core/errors.js';
import type { Context } from '../routers/context.js';
import type { Placeholder } from './placeholder.js';
import {
  type ClaimRequest,
  capExceeded,
  claimLocal,
  deleteExpired,
  finishLocal,
  type Limits,
  readRecord,
  type StoredRecord,
} from './record-store.js';
import type { ResponseCipher } from './response-cipher.js';

export type ExecResult = { ok: true; data: unknown } | { ok: false; error: TRPCError };

export interface IdempotentRequest extends ClaimRequest {
  /** Canonical REST path of the resource a 202 points at, when its id is known. */
  location?: (resourceId: string) => string;
  /** What the protocol did for this request (for the access log); set by the engine. */
  outcome?: Outcome;
}

export type Outcome =
  | 'executed'
  | 'replayed'
  | 'mismatch'
  | 'in_flight'
  | 'failed_final'
  | 'rolled_back'
  | 'limited'
  | 'lease_takeover'
  | 'failed_retryable';

interface StoredResponse {
  s: number;
  h: Record<string, string>;
  b: unknown;
}

const PG_LOCK_NOT_AVAILABLE = '55P03';
const PG_DEADLOCK = '40P01';
const POLL_MS = 25;

/**
 * The business write hit our own lock_timeout (it waited on a row another transaction holds, e.g. a
 * concurrent create of the same merchantOrderNo under another key) or a deadlock. The database
 * could not serve the request now: everything is rolled back, so it is a 503 with Retry-After and
 * a retry with the same key executes, not an opaque 500 (found by test/idempotency/in-flight.test.ts).
 */
function isBusyDatabase(err: unknown): boolean {
  let current = err as { code?: unknown; cause?: unknown; parent?: unknown } | undefined;
  for (let i = 0; i < 6 && current; i++) {
    if (current.code === PG_LOCK_NOT_AVAILABLE || current.code === PG_DEADLOCK) return true;
    current = (current.cause ?? current.parent) as typeof current;
  }
  return false;
}

/** A request-caused failure (a retry would fail the same way): stored and replayed. */
function isFinalFailure(status: number): boolean {
  return status >= 400 && status < 500 && status !== 408 && status !== 429;
}

export class IdempotencyEngine {
  constructor(
    private readonly sequelize: Sequelize,
    private readonly config: Config,
    private readonly cipher: ResponseCipher,
    private readonly logger: Logger,
    private readonly placeholder?: Placeholder,
    private readonly onOutcome: (operation: string, outcome: Outcome) => void = () => {},
  ) {}

  get limits(): Limits {
    return {
      maxInFlight: this.config.IDEMPOTENCY_MAX_IN_FLIGHT,
      maxRetained: this.config.IDEMPOTENCY_MAX_RETAINED,
      waitMs: this.config.IDEMPOTENCY_WAIT_MS,
    };
  }

  encryptResponse(scopeKey: string, status: number, headers: Record<string, string>, body: unknown): string {
    return this.cipher.encrypt(
      JSON.stringify({ s: status, h: headers, b: body } satisfies StoredResponse),
      scopeKey,
    );
  }

  /**
   * Mode A: the business write and the record's final state commit in one transaction. Exactly one
   * of any number of concurrent duplicates (any instance, any transport) inserts the record; the
   * others wait on its primary key (bounded by lock_timeout) and then replay, or get 202.
   */
  async runLocal(
    ctx: Context,
    req: IdempotentRequest,
    exec: (tx: Transaction) => Promise<ExecResult>,
  ): Promise<ExecResult> {
    // Fast path for retries: one indexed read, no transaction. A finished record is answered at
    // once (replay or 40901); a missing one (the common case for a new key) goes on to the claim.
    const existing = await readRecord(this.sequelize, req.scopeKey);
    if (existing && !existing.expired) return this.answerExisting(ctx, req, existing);

    const deadline = Date.now() + this.config.IDEMPOTENCY_WAIT_MS;
    const heldPlaceholder = await this.placeholder?.acquire(req.scopeKey);
    try {
      let waitMs = this.config.IDEMPOTENCY_WAIT_MS;
      if (heldPlaceholder === false) {
        // Someone holds the placeholder: most likely a duplicate in flight. Wait for its record by
        // polling, outside PostgreSQL (no connection or lock held), within the same wait bound.
        const found = await this.pollForRecord(ctx, req.scopeKey, deadline);
        if (found) return await this.answerExisting(ctx, req, found);
        // Not there yet: the claim below decides, with only the time left of the bound. If the
        // holder is alive it holds the key's row lock and we get 202; if it crashed, we execute.
        waitMs = Math.max(1, deadline - Date.now());
      }
      for (let attempt = 0; attempt < 3; attempt++) {
        const done = await this.tryLocal(ctx, req, exec, waitMs);
        if (done) return done;
      }
      // The record kept vanishing under us (rolled back or purged between claim and read).
      return this.processing(ctx, req, null);
    } finally {
      if (heldPlaceholder) await this.placeholder?.release(req.scopeKey, heldPlaceholder);
    }
  }

  private async pollForRecord(
    ctx: Context,
    scopeKey: string,
    deadline: number,
  ): Promise<StoredRecord | undefined> {
    while (Date.now() < deadline && !ctx.signal?.aborted) {
      await sleep(Math.min(POLL_MS, Math.max(1, deadline - Date.now())));
      const found = await readRecord(this.sequelize, scopeKey);
      if (found && !found.expired) return found;
    }
    return undefined;
  }

  private async tryLocal(
    ctx: Context,
    req: IdempotentRequest,
    exec: (tx: Transaction) => Promise<ExecResult>,
    waitMs: number,
  ): Promise<ExecResult | undefined> {
    const t = await this.sequelize.transaction();
    let claimed: boolean;
    try {
      claimed = await claimLocal(t, req, { ...this.limits, waitMs });
    } catch (err) {
      await t.rollback().catch(() => {});
      if ((err as { code?: string }).code === PG_LOCK_NOT_AVAILABLE) return this.processing(ctx, req, null);
      throw err;
    }
    if (!claimed) {
      await t.rollback();
      const existing = await readRecord(this.sequelize, req.scopeKey);
      if (!existing) return this.refuseByCap(req);
      if (existing.expired && existing.status !== 'PROCESSING') {
        await deleteExpired(this.sequelize, req.scopeKey);
        return undefined;
      }
      return this.answerExisting(ctx, req, existing);
    }

    let result: ExecResult;
    try {
      result = await exec(t);
    } catch (err) {
      await t.rollback().catch(() => {});
      throw err;
    }
    if (!result.ok && isBusyDatabase(result.error)) {
      result = {
        ok: false,
        error: toTrpcError(new ServiceUnavailable('Database busy; retry with the same Idempotency-Key')),
      };
    }
    try {
      if (result.ok) {
        const status = ctx.response.status ?? 200;
        const location = ctx.response.headers.Location;
        const headers: Record<string, string> = location ? { Location: location } : {};
        const body = this.encryptResponse(req.scopeKey, status, headers, result.data);
        await finishLocal(t, req.scopeKey, 'SUCCEEDED', status, body, ctx.response.resourceId ?? null);
        await t.commit();
        this.report(req.operation, 'executed', req);
        return result;
      }
      const mapped = toErrorResponse(result.error);
      if (isFinalFailure(mapped.status)) {
        const body = this.encryptResponse(req.scopeKey, mapped.status, {}, mapped.body);
        await finishLocal(t, req.scopeKey, 'FAILED_FINAL', mapped.status, body, null);
        await t.commit();
        this.report(req.operation, 'failed_final', req);
        return result;
      }
      // Transient (5xx, unknown): roll everything back so no PROCESSING row is left; a retry executes.
      await t.rollback();
      this.report(req.operation, 'rolled_back', req);
      return result;
    } catch (err) {
      await t.rollback().catch(() => {});
      throw err;
    }
  }

  /** No conflicting record, yet the insert did not happen: a per-user cap refused it. */
  async refuseByCap(req: IdempotentRequest): Promise<never> {
    this.report(req.operation, 'limited', req);
    const cap = await capExceeded(this.sequelize, req.userScope, this.limits);
    if (cap === 'in-flight')
      throw new TooManyRequests(42901, 'Too many requests in progress for this user', 1);
    throw new TooManyRequests(42902, 'Too many idempotency keys retained for this user', 60);
  }

  /** Same scope seen again: compare fingerprints, then replay, or wait for the one in flight. */
  async answerExisting(ctx: Context, req: IdempotentRequest, found: StoredRecord): Promise<ExecResult> {
    let record = found;
    if (record.requestHash !== req.requestHash) {
      this.report(req.operation, 'mismatch', req);
      throw new Conflict(
        ConflictCode.IdempotencyKeyReused,
        'Idempotency-Key was already used with a different request',
      );
    }
    const deadline = Date.now() + this.config.IDEMPOTENCY_WAIT_MS;
    while (record.status === 'PROCESSING' && Date.now() < deadline && !ctx.signal?.aborted) {
      await sleep(Math.min(POLL_MS, Math.max(1, deadline - Date.now())));
      const again = await readRecord(this.sequelize, req.scopeKey);
      if (!again) return this.processing(ctx, req, record.resourceId);
      record = again;
    }
    if (record.status === 'SUCCEEDED' || record.status === 'FAILED_FINAL')
      return this.replay(ctx, req, record);
    return this.processing(ctx, req, record.resourceId);
  }

  replay(ctx: Context, req: IdempotentRequest, record: StoredRecord): ExecResult {
    const stored = JSON.parse(this.cipher.decrypt(record.responseBody ?? '', req.scopeKey)) as StoredResponse;
    this.report(req.operation, 'replayed', req);
    const headers = { ...stored.h, 'Idempotent-Replayed': 'true' };
    if (stored.s >= 400) throw new ReplayedError(stored.s, stored.b as Envelope<null>, headers);
    ctx.response.status = stored.s;
    Object.assign(ctx.response.headers, headers);
    if (record.resourceId) ctx.response.resourceId = record.resourceId;
    return { ok: true, data: stored.b };
  }

  /** 202: the first request is still running; the client polls Location or retries after Retry-After. */
  processing(ctx: Context, req: IdempotentRequest, resourceId: string | null): ExecResult {
    this.report(req.operation, 'in_flight', req);
    ctx.response.status = 202;
    ctx.response.headers['Retry-After'] = '1';
    if (resourceId && req.location) ctx.response.headers.Location = req.location(resourceId);
    return {
      ok: true,
      data: {
        code: 202,
        message: 'The first request with this Idempotency-Key is still processing',
        data: { status: 'PROCESSING', resourceId },
      },
    };
  }

  get log(): Logger {
    return this.logger;
  }

  report(operation: string, outcome: Outcome, req?: IdempotentRequest): void {
    if (req) req.outcome = outcome;
    this.onOutcome(operation, outcome);
  }
}

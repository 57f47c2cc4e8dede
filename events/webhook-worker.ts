import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from 'pino';
import type { Sequelize } from 'sequelize';
import type { Config } from '../core/config.js';
import { sqlRows } from '../core/sql.js';
import { within } from '../core/within.js';
import { policyFromConfig } from './destination-guard.js';
import { readEvent } from './feed.js';
import { nextAttemptDelayMs } from './retry-schedule.js';
import { type AttemptResult, deliverOnce } from './webhook-sender.js';
import { SecretBox } from './webhook-store.js';

/**
 * Webhook delivery attempts (CONTRACT section 12; docs/DECISIONS.md "Webhook deliveries").
 *
 * `dispatch()` claims due PENDING deliveries with FOR UPDATE SKIP LOCKED, giving each a fresh owner
 * token and a lease, starts their attempts on this instance without waiting for them, and returns:
 * the dispatcher (`dispatchFor`, one run of the job library's recurring chain, server/webhooks.ts)
 * goes on claiming and is never held by a slow receiver. An attempt:
 * the endpoint checked again (deleted: no request), the event read from the outbox, the destination
 * checked again (production's private-network refusal), one signed POST bounded by
 * WEBHOOK_TIMEOUT_MS, then its result written only while the token is still the claim's (fenced).
 *
 * One attempt of a delivery at a time: the claim moves next_attempt_at to the lease's end, so the
 * delivery is not due again before the lease ends, and an attempt only starts when the whole of it
 * (the request's time-out and a DNS allowance) fits before that end, measured on this instance's
 * monotonic clock from before the claim. A dead instance's delivery is due again when its lease
 * ends, and claimed with a new token; a late result of the old attempt matches no row.
 */

export type WebhookSettings = Pick<
  Config,
  | 'NODE_ENV'
  | 'WEBHOOK_TIMEOUT_MS'
  | 'WEBHOOK_MAX_ATTEMPTS'
  | 'WEBHOOK_RETRY_BASE_MS'
  | 'WEBHOOK_ALLOW_PRIVATE_NETWORKS'
  | 'RESPONSE_ENCRYPTION_KEY_ID'
  | 'RESPONSE_ENCRYPTION_KEY'
  | 'RESPONSE_ENCRYPTION_PREVIOUS_KEYS'
>;

/** The contract's first wait (retry-schedule.ts); WEBHOOK_RETRY_BASE_MS scales the whole schedule. */
const CONTRACT_FIRST_WAIT_MS = 5000;
/** What an attempt may spend outside the request itself: the DNS lookup, reading the endpoint and event. */
const OUTSIDE_REQUEST_MS = 5000;

/** Marks the worker's statements (a query recorder tells them from a request's; a DBA sees whose they are). */
export const WEBHOOK_WORKER_SQL_TAG = '/* webhook-worker */';
const TAG = WEBHOOK_WORKER_SQL_TAG;

export const leaseMsFor = (timeoutMs: number) => 2 * timeoutMs + 2 * OUTSIDE_REQUEST_MS;

interface Claimed {
  id: string;
  endpoint_id: string;
  event_id: string;
  attempts: number;
  lease_owner: string;
}

export interface DeliveriesOptions {
  sequelize: Sequelize;
  logger: Logger;
  settings: WebhookSettings;
  /** Attempts this instance runs at once at most (a claim takes only what is left). */
  maxInFlight?: number;
  random?: () => number;
}

export class WebhookDeliveries {
  private readonly inFlight = new Set<Promise<void>>();
  private readonly secrets: SecretBox;
  readonly leaseMs: number;
  private readonly maxInFlight: number;

  constructor(private readonly options: DeliveriesOptions) {
    this.secrets = new SecretBox(options.settings);
    this.leaseMs = leaseMsFor(options.settings.WEBHOOK_TIMEOUT_MS);
    this.maxInFlight = options.maxInFlight ?? 64;
  }

  /** Claims what is due (up to the free slots), starts the attempts, and returns how many it claimed. */
  async dispatch(signal?: AbortSignal): Promise<number> {
    const free = this.maxInFlight - this.inFlight.size;
    if (free <= 0 || signal?.aborted) return 0;
    // Before the claim: the lease's end in the database's clock is at least this far ahead.
    const claimedAt = performance.now();
    const claimed = await sqlRows<Claimed>(
      this.options.sequelize,
      `${TAG} WITH due AS (
         SELECT d.id FROM webhook_deliveries d
          WHERE d.status = 'PENDING' AND d.next_attempt_at <= now()
            AND EXISTS (SELECT 1 FROM webhook_endpoints e WHERE e.id = d.endpoint_id AND e.status = 'ENABLED')
          ORDER BY d.next_attempt_at
          LIMIT $1
          FOR UPDATE OF d SKIP LOCKED)
       UPDATE webhook_deliveries d
          SET lease_owner = gen_random_uuid(),
              lease_until = now() + make_interval(secs => $2::double precision / 1000),
              next_attempt_at = now() + make_interval(secs => $2::double precision / 1000)
         FROM due WHERE d.id = due.id
       RETURNING d.id::text AS id, d.endpoint_id, d.event_id, d.attempts, d.lease_owner::text AS lease_owner`,
      [free, this.leaseMs],
    );
    const deadline = claimedAt + this.leaseMs;
    for (const delivery of claimed) {
      const run = this.attempt(delivery, deadline).catch((err: unknown) =>
        // The lease ends and another attempt follows: nothing is lost.
        this.options.logger.warn(
          { err, deliveryId: delivery.id },
          'webhook attempt failed before its result was written',
        ),
      );
      this.inFlight.add(run);
      void run.finally(() => this.inFlight.delete(run));
    }
    return claimed.length;
  }

  /**
   * Claims again and again for about `runMs`: every `pollMs`, or at once after a claim that filled
   * every free slot (more may be due). One run of the recurring job does this, so the job library
   * stores one job per run rather than one per poll, and a new delivery waits about `pollMs` / 2.
   */
  async dispatchFor(runMs: number, pollMs: number, signal?: AbortSignal): Promise<number> {
    const end = performance.now() + runMs;
    let total = 0;
    while (!signal?.aborted) {
      const free = this.maxInFlight - this.inFlight.size;
      const claimed = await this.dispatch(signal);
      total += claimed;
      if (performance.now() >= end) break;
      if (claimed > 0 && claimed === free) continue;
      await sleep(pollMs, undefined, { signal }).catch(() => {});
    }
    return total;
  }

  /**
   * Waits for the attempts this instance has started (each is bounded by its time-out and its
   * lease), or `withinMs` at most: one still running then is taken again after its lease.
   */
  async drain(withinMs?: number): Promise<void> {
    const settled = Promise.allSettled([...this.inFlight]);
    await (withinMs === undefined ? settled : within(settled, withinMs));
  }

  get running(): number {
    return this.inFlight.size;
  }

  private async attempt(delivery: Claimed, deadline: number): Promise<void> {
    const { sequelize, settings, logger } = this.options;
    if (delivery.attempts >= settings.WEBHOOK_MAX_ATTEMPTS) {
      // WEBHOOK_MAX_ATTEMPTS was lowered below this delivery's count (a restart with a new setting):
      // it has had every attempt it is allowed, so it fails without another.
      await this.exhaust(delivery);
      return;
    }
    const [endpoint] = await sqlRows<{ url: string; secret_ciphertext: string; status: string }>(
      sequelize,
      `${TAG} SELECT url, secret_ciphertext, status FROM webhook_endpoints WHERE id = $1`,
      [delivery.endpoint_id],
    );
    if (endpoint?.status !== 'ENABLED') {
      await this.finish(
        delivery,
        'FAILED',
        { ok: false, statusCode: null, error: 'endpoint deleted' },
        false,
      );
      return;
    }
    const event = await readEvent(sequelize, delivery.event_id);
    if (!event) {
      const error = 'the event is no longer retained (EVENT_RETENTION_DAYS)';
      await this.finish(delivery, 'FAILED', { ok: false, statusCode: null, error }, false);
      return;
    }
    const timeoutMs = settings.WEBHOOK_TIMEOUT_MS;
    if (performance.now() + timeoutMs + OUTSIDE_REQUEST_MS > deadline) {
      // Too late to fit the attempt in its lease: nothing was sent, so it is simply due again.
      await this.release(delivery);
      return;
    }
    const result = await deliverOnce(
      { url: endpoint.url, secret: this.secrets.open(delivery.endpoint_id, endpoint.secret_ciphertext) },
      event.event,
      { timeoutMs, policy: policyFromConfig(settings) },
    );
    const status = result.ok ? 'SUCCEEDED' : 'PENDING';
    const written = await this.finish(delivery, status, result, true);
    logger.debug(
      {
        deliveryId: delivery.id,
        endpointId: delivery.endpoint_id,
        eventId: delivery.event_id,
        attempt: delivery.attempts + 1,
        statusCode: result.statusCode,
        error: result.error,
        written,
      },
      'webhook attempt',
    );
  }

  /**
   * The attempt's result, written only while this attempt still holds the delivery (its token, and
   * the delivery PENDING): a stale attempt's result is refused. Returns whether it was written.
   */
  private async finish(
    delivery: Claimed,
    status: 'SUCCEEDED' | 'FAILED' | 'PENDING',
    result: AttemptResult,
    counts: boolean,
  ): Promise<boolean> {
    const { settings } = this.options;
    const attempt = delivery.attempts + (counts ? 1 : 0);
    let final = status;
    let delayMs: number | null = null;
    if (status === 'PENDING') {
      const scheduled = nextAttemptDelayMs(
        attempt,
        (this.options.random ?? Math.random)(),
        settings.WEBHOOK_MAX_ATTEMPTS,
      );
      if (scheduled === null) final = 'FAILED';
      else delayMs = Math.round((scheduled * settings.WEBHOOK_RETRY_BASE_MS) / CONTRACT_FIRST_WAIT_MS);
    }
    const rows = await sqlRows<{ id: string }>(
      this.options.sequelize,
      `${TAG} UPDATE webhook_deliveries
          SET status = $3, attempts = $4, last_status_code = $5, last_error = $6,
              next_attempt_at = CASE WHEN $7::bigint IS NULL THEN NULL
                                     ELSE now() + make_interval(secs => $7::double precision / 1000) END,
              lease_owner = NULL, lease_until = NULL, updated_at = now()
        WHERE id = $1 AND lease_owner = $2::uuid AND status = 'PENDING'
       RETURNING id`,
      [
        delivery.id,
        delivery.lease_owner,
        final,
        attempt,
        result.statusCode,
        result.error === null ? null : result.error.slice(0, 500),
        delayMs,
      ],
    );
    return rows.length > 0;
  }

  /** FAILED without another attempt; its last attempt's status code and error stay as they were. */
  private async exhaust(delivery: Claimed): Promise<void> {
    await sqlRows(
      this.options.sequelize,
      `${TAG} UPDATE webhook_deliveries
          SET status = 'FAILED', next_attempt_at = NULL, lease_owner = NULL, lease_until = NULL, updated_at = now()
        WHERE id = $1 AND lease_owner = $2::uuid AND status = 'PENDING'`,
      [delivery.id, delivery.lease_owner],
    );
  }

  /** Gives a claimed delivery back without an attempt (nothing was sent). */
  private async release(delivery: Claimed): Promise<void> {
    await sqlRows(
      this.options.sequelize,
      `${TAG} UPDATE webhook_deliveries SET lease_owner = NULL, lease_until = NULL, next_attempt_at = now()
        WHERE id = $1 AND lease_owner = $2::uuid AND status = 'PENDING'`,
      [delivery.id, delivery.lease_owner],
    );
  }
}

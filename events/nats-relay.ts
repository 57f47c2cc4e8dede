import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from 'pino';
import type { Sequelize } from 'sequelize';
import { failpoint } from '../core/failpoints.js';
import { sqlRows } from '../core/sql.js';
import { type FeedEvent, type Position, readFeed } from './feed.js';
import type { NatsBus, PublishResult } from './nats-bus.js';

/**
 * The NATS relay (CONTRACT section 12 "Bus"; docs/DECISIONS.md "The NATS relay"): publishes the
 * outbox to JetStream. It reads the feed (every tenant, in (tx_id, seq) order, only below the
 * feed's horizon, so it never passes an event whose transaction is still open) after its position
 * in `event_relays`, publishes each event with Nats-Msg-Id = the event id and waits for its ack, one
 * after another, then moves the position past what was acknowledged. A relay that dies between
 * publishing and moving the position publishes those events again; JetStream drops each repeat
 * within the stream's duplicate window. Until an event is acknowledged the position stays before it:
 * with NATS down, events wait in the outbox (as long as EVENT_RETENTION_DAYS keeps them).
 */

export const RELAY_NAME = 'nats';
/** The duplicate window the relay asks for when it creates the stream: far above any crash-and-restart. */
export const RELAY_DUPLICATE_WINDOW_MS = 10 * 60_000;

/** What the relay needs of the bus (tests give a fake one). */
export interface Publisher {
  subjectFor(tenantId: string, type: string): string;
  publish(tenantId: string, event: FeedEvent['event']): Promise<PublishResult>;
}

/** A failure to reach NATS or to get an ack: the relay waits and tries again; the position stays. */
export class NatsUnavailable extends Error {
  constructor(override readonly cause: unknown) {
    super(`NATS: ${cause instanceof Error ? cause.message : String(cause)}`);
  }
}

/** The relay's position (created at the start of the feed the first time). */
export async function relayPosition(sequelize: Sequelize, name = RELAY_NAME): Promise<Position> {
  const rows = await sqlRows<{ tx_id: string; seq: string }>(
    sequelize,
    `WITH made AS (INSERT INTO event_relays (name) VALUES ($1) ON CONFLICT (name) DO NOTHING RETURNING tx_id, seq)
     SELECT tx_id::text AS tx_id, seq::text AS seq FROM made
     UNION ALL SELECT tx_id::text, seq::text FROM event_relays WHERE name = $1`,
    [name],
  );
  return { txId: BigInt(rows[0].tx_id), seq: BigInt(rows[0].seq) };
}

/** Moves the position forward only: a relay that was overtaken (one run outliving its expiry) never moves it back. */
export async function advanceRelay(sequelize: Sequelize, to: Position, name = RELAY_NAME): Promise<void> {
  await sqlRows(
    sequelize,
    `UPDATE event_relays SET tx_id = $2::xid8, seq = $3::bigint, updated_at = now()
      WHERE name = $1 AND (tx_id, seq) < ($2::xid8, $3::bigint)`,
    [name, to.txId.toString(), to.seq.toString()],
  );
}

export interface BatchResult {
  /** Events read from the feed (published or skipped). */
  read: number;
  published: number;
  /** Published again within the duplicate window: JetStream kept its first copy. */
  duplicates: number;
}

/**
 * One batch: reads up to `limit` events after the position, publishes them in feed order, each
 * acknowledged before the next is sent (so the stream holds every tenant's events in feed order),
 * then moves the position. On a NATS failure the position moves past what was acknowledged and the
 * failure is thrown as NatsUnavailable; a database failure is thrown as it is.
 */
export async function relayBatch(
  sequelize: Sequelize,
  bus: Publisher,
  options: { limit: number; logger: Logger; signal?: AbortSignal; name?: string },
): Promise<BatchResult> {
  const name = options.name ?? RELAY_NAME;
  const after = await relayPosition(sequelize, name);
  const events = await readFeed(sequelize, { after, limit: options.limit });
  const result: BatchResult = { read: 0, published: 0, duplicates: 0 };
  let reached: Position | undefined;
  try {
    for (const e of events) {
      if (options.signal?.aborted) break;
      let subjectOk = true;
      try {
        bus.subjectFor(e.tenantId, e.event.type);
      } catch (err) {
        subjectOk = false;
        // No subject can carry it (a tenant id with a dot, a wildcard or a space): it would stop the
        // relay for good. It stays in the feed, the subscription and the webhooks.
        options.logger.error(
          { err, eventId: e.event.id },
          'event not published to NATS: no subject for its tenant',
        );
      }
      if (subjectOk) {
        const ack = await bus.publish(e.tenantId, e.event).catch((err: unknown) => {
          throw new NatsUnavailable(err);
        });
        result.published += 1;
        if (ack.duplicate) result.duplicates += 1;
      }
      result.read += 1;
      reached = e.position;
    }
  } finally {
    if (reached) {
      if (result.published > 0) await failpoint('events.relay.after-publish');
      await advanceRelay(sequelize, reached, name);
    }
  }
  return result;
}

export interface RelayRunOptions {
  sequelize: Sequelize;
  logger: Logger;
  /** Opens the bus (NatsBus.connect with the service's settings). */
  connect: () => Promise<NatsBus>;
  /** Events per batch. */
  batch?: number;
  /** The pause between feed reads when the relay has caught up. */
  idleMs?: number;
  /** The pause before trying NATS again after a failure. */
  retryMs?: number;
  /** How long one run keeps relaying before it hands over to the next run (on any instance). */
  runMs?: number;
}

/**
 * The relay of one instance: each run (a recurring job, one at a time across instances) connects,
 * relays until `runMs` passed or the instance stops, then closes its connection. NATS failures are
 * said once (and once when NATS is back), not at every retry.
 */
export class NatsRelay {
  private downSince?: number;
  private warnedWindow = false;

  constructor(private readonly options: RelayRunOptions) {}

  async run(signal: AbortSignal): Promise<void> {
    const { logger, sequelize } = this.options;
    const batch = this.options.batch ?? 200;
    const idleMs = this.options.idleMs ?? 250;
    const retryMs = this.options.retryMs ?? 1000;
    const until = Date.now() + (this.options.runMs ?? 10_000);
    let bus: NatsBus | undefined;
    try {
      while (!signal.aborted && Date.now() < until) {
        try {
          bus ??= await this.options.connect().catch((err: unknown) => {
            throw new NatsUnavailable(err);
          });
          this.checkWindow(bus);
          const done = await relayBatch(sequelize, bus, { limit: batch, logger, signal });
          this.up();
          if (done.duplicates > 0)
            logger.info(
              { duplicates: done.duplicates },
              'NATS relay published events again (JetStream kept one copy)',
            );
          if (done.read < batch) await pause(idleMs, signal);
        } catch (err) {
          if (!(err instanceof NatsUnavailable)) throw err;
          this.down(err);
          await bus?.close(1000).catch(() => {});
          bus = undefined;
          await pause(retryMs, signal);
        }
      }
    } finally {
      await bus?.close().catch(() => {});
    }
  }

  private checkWindow(bus: NatsBus): void {
    if (this.warnedWindow || bus.duplicateWindowMs >= RELAY_DUPLICATE_WINDOW_MS) return;
    this.warnedWindow = true;
    this.options.logger.warn(
      { stream: bus.stream, duplicateWindowMs: bus.duplicateWindowMs, wantedMs: RELAY_DUPLICATE_WINDOW_MS },
      'the NATS stream exists with a shorter duplicate window: an event published again after it (a relay that crashed and came back later) is stored twice',
    );
  }

  private down(err: NatsUnavailable): void {
    if (this.downSince !== undefined) return;
    this.downSince = Date.now();
    this.options.logger.warn(
      { err: err.cause },
      'NATS unreachable: events wait in the outbox, the relay retries',
    );
  }

  private up(): void {
    if (this.downSince === undefined) return;
    this.options.logger.info(
      { downMs: Date.now() - this.downSince },
      'NATS reachable again: the relay resumed',
    );
    this.downSince = undefined;
  }
}

const pause = (ms: number, signal: AbortSignal) => sleep(ms, undefined, { signal }).catch(() => {});

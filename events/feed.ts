import type { Sequelize } from 'sequelize';
import { type PacedBatches, pacedBatches } from '../core/pacing.js';
import { sqlRows } from '../core/sql.js';
import { parseEventRow, renderEventData } from './render.js';

/** CONTRACT section 12's types. */
export const EVENT_TYPES = [
  'order.created',
  'order.paid',
  'payment.succeeded',
  'payment.failed',
  'refund.succeeded',
  'refund.failed',
  'export.succeeded',
  'export.failed',
] as const;
export type EventType = (typeof EVENT_TYPES)[number];

/** An Event as the API shows it (CONTRACT section 12). */
export interface EventDto {
  id: string;
  type: string;
  createdAt: string;
  data: unknown;
}

/** A position in the feed: the event's transaction id and sequence number (its id says both). */
export interface Position {
  txId: bigint;
  seq: bigint;
}

export const START: Position = { txId: 0n, seq: 0n };

/**
 * The last position below a horizon (readFeedPage's): every event at or before it belongs to a
 * transaction that has ended (it is visible, or it never will be), and every event still to commit
 * comes after it.
 */
export const positionBelow = (horizon: bigint): Position => ({ txId: horizon - 1n, seq: 2n ** 63n - 1n });

const later = (a: Position, b: Position): Position =>
  a.txId > b.txId || (a.txId === b.txId && a.seq > b.seq) ? a : b;

const ID = /^evt_(\d{1,20})_(\d{1,19})$/;

/** The position an event id (or a cursor: the same form) names; undefined when it is not one. */
export function parsePosition(cursor: string): Position | undefined {
  const m = ID.exec(cursor);
  if (!m) return undefined;
  const txId = BigInt(m[1]);
  const seq = BigInt(m[2]);
  if (txId >= 2n ** 64n || seq >= 2n ** 63n) return undefined;
  return { txId, seq };
}

export const formatPosition = (p: Position): string => `evt_${p.txId}_${p.seq}`;

export interface FeedQuery {
  /** Only this tenant's events; every tenant's when undefined (a relay). */
  tenantId?: string;
  /** Only the events of this user's resources (a user's view); all of the tenant's when undefined. */
  userId?: string;
  after: Position;
  limit: number;
  types?: readonly string[];
}

interface EventRow {
  id: string;
  tx_id: string;
  seq: string;
  tenant_id: string;
  user_id: string | null;
  type: string;
  /** The stored snapshot's JSON text (`row::text`), parsed by parseEventRow. */
  row: string;
  created_at: Date;
}

/** An event row's columns as EventRow names them. */
const EVENT_COLUMNS =
  'e.id, e.tx_id::text AS tx_id, e.seq, e.tenant_id, e.user_id, e.type, e.row::text AS row, e.created_at';

export interface FeedEvent {
  position: Position;
  tenantId: string;
  userId: string | null;
  event: EventDto;
}

/** A page of the feed, and where the next read of the same query starts (CONTRACT section 12 `next`). */
export interface FeedPage {
  events: FeedEvent[];
  next: Position;
}

/**
 * The events after `after`, in feed order, that no later commit can precede.
 *
 * The trap (DESIGN "Events: the transactional outbox"): sequence numbers are taken at INSERT and
 * transactions commit in another order, so "seq > last seen" skips an event whose transaction was
 * still open when a later one was read. Here the order is (tx_id, seq) and only events of
 * transactions below the statement's horizon are shown: `events_horizon()` (migration
 * 20261128000701), the snapshot's oldest open transaction that is not known to run in another
 * database. Each transaction below it has ended or cannot write this database's events, and every one
 * still open here or yet to start has a tx_id at or above it, so nothing can ever appear before a
 * position already read. The cost: an event waits for every older writing transaction of this
 * database to end; the service keeps its writing transactions short.
 *
 * `next`: after a full page, its last event (more may follow below the horizon). After a shorter one
 * the query has seen every event it matches up to the horizon, and nothing can commit there any more,
 * so `next` is the horizon itself (positionBelow), read in the same statement (the same snapshot) as
 * the page: a reader of a rare type, or of a user with few events among many, moves past the events
 * it skipped instead of scanning them again at every read. Never before `after`.
 */
export async function readFeedPage(sequelize: Sequelize, q: FeedQuery): Promise<FeedPage> {
  const values: unknown[] = [q.after.txId.toString(), q.after.seq.toString(), q.limit];
  const where: string[] = ['(e.tx_id, e.seq) > ($1::xid8, $2::bigint)', 'e.tx_id < h.horizon'];
  if (q.tenantId !== undefined) {
    values.push(q.tenantId);
    where.push(`e.tenant_id = $${values.length}`);
  }
  if (q.userId !== undefined) {
    values.push(q.userId);
    where.push(`e.user_id = $${values.length}`);
  }
  if (q.types && q.types.length > 0) {
    values.push(q.types);
    where.push(`e.type = ANY ($${values.length}::text[])`);
  }
  // One row even when the page is empty (the horizon alone, its event columns null).
  const rows = await sqlRows<Partial<EventRow> & { horizon: string }>(
    sequelize,
    `SELECT h.horizon::text AS horizon, page.*
       FROM (SELECT events_horizon() AS horizon) h
       LEFT JOIN LATERAL (SELECT ${EVENT_COLUMNS}
                            FROM events e WHERE ${where.join(' AND ')} ORDER BY e.tx_id, e.seq LIMIT $3) page ON true
      ORDER BY page.tx_id::xid8, page.seq`,
    values,
  );
  const events = rows.filter((r): r is EventRow & { horizon: string } => r.id != null).map(toFeedEvent);
  const last = events.at(-1);
  const next =
    last && events.length >= q.limit ? last.position : later(q.after, positionBelow(BigInt(rows[0].horizon)));
  return { events, next };
}

/** readFeedPage's events alone (a reader that keeps its position at the last event it handled). */
export async function readFeed(sequelize: Sequelize, q: FeedQuery): Promise<FeedEvent[]> {
  return (await readFeedPage(sequelize, q)).events;
}

export function toFeedEvent(r: EventRow): FeedEvent {
  return {
    position: { txId: BigInt(r.tx_id), seq: BigInt(r.seq) },
    tenantId: r.tenant_id,
    userId: r.user_id === null ? null : String(r.user_id),
    event: {
      id: r.id,
      type: r.type,
      createdAt: new Date(r.created_at).toISOString(),
      data: renderEventData(r.type, parseEventRow(r.row)),
    },
  };
}

/**
 * The event of one id (a webhook delivery's), or undefined once purged. Found by the position its id
 * spells: the primary key is the position, and no index is kept on the id's text.
 */
export async function readEvent(sequelize: Sequelize, id: string): Promise<FeedEvent | undefined> {
  const at = parsePosition(id);
  if (!at) return undefined;
  const rows = await sqlRows<EventRow>(
    sequelize,
    `SELECT ${EVENT_COLUMNS}
       FROM events e WHERE e.tx_id = $1::xid8 AND e.seq = $2::bigint`,
    [at.txId.toString(), at.seq.toString()],
  );
  return rows[0] && toFeedEvent(rows[0]);
}

/** The retention job's batch: events deleted per statement. */
const EVENT_PURGE_BATCH = 5000;

/**
 * The retention job's run: every event past the retention, a batch at a time until none is left at
 * the head, paced as the records' purge is (PURGE_BUSY_PERCENT: core/pacing.ts), so that deleting a
 * backlog does not take a core from the requests. Returns how many it deleted.
 */
export const purgeExpiredEvents = (
  sequelize: Sequelize,
  retentionDays: number,
  options: Omit<PacedBatches, 'batchSize'> = {},
): Promise<number> =>
  pacedBatches({ maxBatches: Number.POSITIVE_INFINITY, ...options, batchSize: EVENT_PURGE_BATCH }, () =>
    purgeEvents(sequelize, retentionDays, EVENT_PURGE_BATCH),
  );

/**
 * Deletes events older than the retention (CONTRACT section 8 EVENT_RETENTION_DAYS), a batch at a time:
 * the oldest `batch` events by feed position, those of them past the retention. It walks the primary
 * key (the position) from its start, so no index on created_at is kept for it (one index fewer on every
 * event); an event that is old but behind a younger one in feed order waits for that one (the retention
 * is a lower bound). Returns how many it deleted: fewer than `batch` means nothing older is left at the
 * head.
 */
async function purgeEvents(sequelize: Sequelize, retentionDays: number, batch = 5000): Promise<number> {
  const rows = await sqlRows<{ n: string }>(
    sequelize,
    `WITH head AS (SELECT tx_id, seq, created_at FROM events ORDER BY tx_id, seq LIMIT $2),
          gone AS (DELETE FROM events e USING head h
                    WHERE e.tx_id = h.tx_id AND e.seq = h.seq
                      AND h.created_at < now() - make_interval(days => $1) RETURNING 1)
     SELECT count(*)::text AS n FROM gone`,
    [retentionDays, batch],
  );
  return Number(rows[0]?.n ?? 0);
}

import { tracked } from '@trpc/server';
import type { Sequelize } from 'sequelize';
import { ServiceUnavailable } from '../../core/errors.js';
import type { Identity } from '../../core/identity.js';
import { sqlRows } from '../../core/sql.js';
import {
  formatPosition,
  type Position,
  parsePosition,
  positionBelow,
  readFeedPage,
  START,
} from '../../events/feed.js';
import { feedWaker } from '../../events/feed-waker.js';
import type { EventPage, ListEventsInput, OnEventInput } from './events.schema.js';

/** Visibility (CONTRACT section 12): an admin sees the tenant's events, a user those of their own resources. */
const visibleTo = (auth: Identity) => ({
  tenantId: auth.tenantId,
  ...(auth.role === 'admin' ? {} : { userId: auth.userId }),
});

/** `after` was checked by the input's schema: a position, or the start of the feed. */
const positionOf = (cursor: string | null | undefined): Position =>
  (cursor ? parsePosition(cursor) : undefined) ?? START;

export async function listEvents(
  sequelize: Sequelize,
  auth: Identity,
  input: ListEventsInput,
): Promise<EventPage> {
  const page = await readFeedPage(sequelize, {
    ...visibleTo(auth),
    after: positionOf(input.after),
    limit: input.limit,
    types: input.types,
  });
  return { items: page.events.map((e) => e.event), next: formatPosition(page.next) };
}

/** Events one read of a subscriber takes; a full page is followed by the next read at once. */
const PAGE = 100;

/**
 * The position a subscription without `lastEventId` starts from: everything visible now is past, so
 * it receives the events that become visible after it subscribed. Every event not yet visible has a
 * transaction id at or above the feed's horizon (events/feed.ts), so the position just below it is the head.
 */
export async function headPosition(sequelize: Sequelize): Promise<Position> {
  const [row] = await sqlRows<{ horizon: string }>(sequelize, 'SELECT events_horizon()::text AS horizon');
  return positionBelow(BigInt(row.horizon));
}

/**
 * Where a subscription starts: after `lastEventId`, or after the head when absent. Taken before the
 * stream is answered (the resolver awaits it), so that a client that saw the stream start (tRPC's
 * `connected`, the link's onStarted) and then reads a resource's state misses no later change.
 */
export const startPosition = async (sequelize: Sequelize, input: OnEventInput): Promise<Position> =>
  input?.lastEventId ? positionOf(input.lastEventId) : headPosition(sequelize);

/**
 * `events.onEvent`: each visible event as `tracked(id, event)`, in feed order, after `start`, read
 * from the outbox (never from memory) so that any instance serves any subscriber with no gap and no
 * duplicate; the instance's poller (events/feed-waker.ts) only says when to read again. Ends when the
 * client goes (the signal).
 */
export async function* eventStream(
  sequelize: Sequelize,
  auth: Identity,
  start: Position,
  types: readonly string[] | undefined,
  signal: AbortSignal,
  /** Subscribers one instance serves at once (EVENT_MAX_SUBSCRIBERS); one more is refused with 503. */
  maxSubscribers: number,
) {
  // A failed poll is not logged here: the subscribers' own reads meet the same database and end
  // their streams with the error (logged by the transport; the client reconnects from its last id).
  const waker = feedWaker(sequelize);
  if (waker.closed) throw new ServiceUnavailable('This instance is shutting down; reconnect');
  if (waker.subscriberCount >= maxSubscribers)
    throw new ServiceUnavailable('Too many subscribers on this instance; reconnect later');
  const release = waker.register();
  try {
    let position = start;
    while (!signal.aborted) {
      const version = waker.version;
      const page = await readFeedPage(sequelize, { ...visibleTo(auth), after: position, limit: PAGE, types });
      for (const e of page.events) yield tracked(e.event.id, e.event);
      // Past the events this subscriber cannot see too (events/feed.ts readFeedPage `next`), so a
      // subscriber of a rare type does not read them again at every wake-up. Its client resumes from
      // its last event's id, which is at or before this.
      position = page.next;
      if (page.events.length < PAGE) await waker.wait(auth.tenantId, version, signal);
      // A retryable error, not the end: tRPC's link keeps the subscription and reconnects (a plain
      // return would end it for good), with its last event id, to another instance.
      if (waker.closed) throw new ServiceUnavailable('This instance is shutting down; reconnect');
    }
  } finally {
    release();
  }
}

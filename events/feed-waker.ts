import type { Sequelize } from 'sequelize';
import { sqlRows } from '../core/sql.js';
import { type Position, START } from './feed.js';

/**
 * Wakes the subscribers of this instance when the feed has grown: one poller per process (not one
 * per subscriber), a cheap indexed query every POLL_MS that reads which tenants have events newly
 * visible below the feed's horizon (events/feed.ts readFeedPage). A subscriber then reads its
 * next page from its own position; the waker carries no event and no position of anyone's, so a
 * missed or spurious wake-up costs latency or a query, never an event (correctness comes from the
 * outbox alone). Polling rather than LISTEN/NOTIFY: it works through PgBouncer's transaction mode,
 * sees every instance's commits alike, and needs no connection of its own.
 *
 * Why "newly visible" suffices: an event becomes visible when the horizon passes its transaction,
 * and the horizon only grows, so every newly visible event lies after every event visible before:
 * the poller keeps the last visible position it saw and asks only for what lies after it.
 */
export const POLL_MS = 200;
/** A subscriber re-reads its position at least this often even if no wake-up comes (a failed poll). */
export const SAFETY_WAKE_MS = 5000;
/** At most this many new events are looked at per poll; more wakes every subscriber. */
const POLL_LIMIT = 1000;

interface Waiter {
  tenantId: string;
  wake: () => void;
}

export class FeedWaker {
  private readonly waiters = new Set<Waiter>();
  private head: Position | undefined;
  private timer: NodeJS.Timeout | undefined;
  private polling = false;
  /** Grows whenever a poll saw new events (of any tenant): what closes the read-then-wait race. */
  private seen = 0;
  /** Subscribers registered (connected) now: what the cap counts. */
  private subscribers = 0;
  private closing = false;

  constructor(
    private readonly sequelize: Sequelize,
    private readonly onError: (err: unknown) => void = () => {},
  ) {}

  get subscriberCount(): number {
    return this.subscribers;
  }

  /** The instance is shutting down: every subscriber's stream is to end (its client reconnects elsewhere). */
  get closed(): boolean {
    return this.closing;
  }

  /** Shutdown: wakes every waiting subscriber, which sees `closed` and ends its stream. */
  close(): void {
    this.closing = true;
    this.wakeAll();
  }

  /** Counts a subscriber for as long as it is connected; returns its release. Starts the poller. */
  register(): () => void {
    this.subscribers += 1;
    this.timer ??= setInterval(() => void this.poll(), POLL_MS);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.subscribers -= 1;
      if (this.subscribers === 0 && this.timer) {
        clearInterval(this.timer);
        this.timer = undefined;
        // A later start takes its head afresh: what happened meanwhile was nobody's concern here.
        this.head = undefined;
      }
    };
  }

  /** Taken before a subscriber reads its page, and handed to `wait` after it read nothing new. */
  get version(): number {
    return this.seen;
  }

  /**
   * Resolves at the next wake-up for the tenant (events became visible), after SAFETY_WAKE_MS at
   * most, or at once when the signal is aborted or a poll saw new events since `version` was taken
   * (they may have become visible after the subscriber's read began: it reads again).
   */
  wait(tenantId: string, version: number, signal: AbortSignal): Promise<void> {
    return new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(safety);
        signal.removeEventListener('abort', done);
        this.waiters.delete(waiter);
        resolve();
      };
      const waiter: Waiter = { tenantId, wake: done };
      const safety = setTimeout(done, SAFETY_WAKE_MS);
      if (signal.aborted || this.closing || version !== this.seen) return done();
      signal.addEventListener('abort', done, { once: true });
      this.waiters.add(waiter);
    });
  }

  private async poll(): Promise<void> {
    if (this.polling || this.waiters.size === 0) return;
    this.polling = true;
    try {
      const first = this.head === undefined;
      const after = this.head ?? START;
      // The first poll only takes the head (newest visible event); later ones read what came after it.
      const rows = await sqlRows<{ tx_id: string; seq: string; tenant_id: string }>(
        this.sequelize,
        first
          ? `SELECT tx_id::text AS tx_id, seq::text AS seq, tenant_id FROM events
              WHERE tx_id < (SELECT events_horizon()) ORDER BY tx_id DESC, seq DESC LIMIT 1`
          : `SELECT tx_id::text AS tx_id, seq::text AS seq, tenant_id FROM events
              WHERE (tx_id, seq) > ($1::xid8, $2::bigint) AND tx_id < (SELECT events_horizon())
              ORDER BY tx_id, seq LIMIT $3`,
        first ? [] : [after.txId.toString(), after.seq.toString(), POLL_LIMIT],
      );
      const last = first ? rows[0] : rows.at(-1);
      if (last) this.head = { txId: BigInt(last.tx_id), seq: BigInt(last.seq) };
      else if (first) this.head = START;
      if (rows.length > 0) this.seen += 1;
      // The first poll wakes everyone: a subscriber may have started waiting before the head was known.
      if (first || rows.length >= POLL_LIMIT) return this.wakeAll();
      if (rows.length === 0) return;
      const tenants = new Set(rows.map((r) => r.tenant_id));
      for (const w of [...this.waiters]) if (tenants.has(w.tenantId)) w.wake();
    } catch (err) {
      this.onError(err);
    } finally {
      this.polling = false;
    }
  }

  private wakeAll(): void {
    for (const w of [...this.waiters]) w.wake();
  }
}

const wakers = new WeakMap<Sequelize, FeedWaker>();

/** Ends every subscription of this process's database (server shutdown); none is taken afterwards. */
export function closeSubscriptions(sequelize: Sequelize): void {
  wakers.get(sequelize)?.close();
}

/** The one waker of this process's database (created at the first subscription). */
export function feedWaker(sequelize: Sequelize, onError?: (err: unknown) => void): FeedWaker {
  let waker = wakers.get(sequelize);
  if (!waker) {
    waker = new FeedWaker(sequelize, onError);
    wakers.set(sequelize, waker);
  }
  return waker;
}

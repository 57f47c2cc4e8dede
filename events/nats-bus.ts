import {
  connect,
  type JetStreamManager,
  JSONCodec,
  type NatsConnection,
  type NatsError,
  type StreamInfo,
} from 'nats';
import { within } from '../core/within.js';
import type { OutgoingEvent } from './webhook-sender.js';

export type NatsBusOptions = {
  /** NATS_URL: one server or a comma-separated list. */
  servers: string;
  /** CONTRACT section 12: `EVENTS`. Tests pass a unique name so they never touch a real stream. */
  stream?: string;
  /** Subjects are `<prefix>.<tenantId>.<type>`; the stream holds `<prefix>.>`. Tests pass their own. */
  subjectPrefix?: string;
  /**
   * JetStream drops a repeated Nats-Msg-Id only within this window (applied when the stream is
   * created here): a publisher that crashed between publish and mark must re-publish within it.
   */
  duplicateWindowMs?: number;
  /** The stream's max_age when created here (EVENT_RETENTION_DAYS); unset: kept until removed. */
  maxAgeMs?: number;
  /** How long publish() waits for the PubAck. */
  ackTimeoutMs?: number;
  connectTimeoutMs?: number;
};

export type PublishResult = { stream: string; seq: number; duplicate: boolean };

const STREAM_NOT_FOUND = 10059;
const NANOS_PER_MS = 1_000_000;
const codec = JSONCodec<OutgoingEvent>();
// A subject token: a dot, a wildcard or white space in a tenant id would publish elsewhere.
const TOKEN = /^[A-Za-z0-9_-]+$/;

/** Publishes events to JetStream; publish() resolves only once the stream stored the event. */
export class NatsBus {
  private constructor(
    private readonly connection: NatsConnection,
    readonly stream: string,
    private readonly subjectPrefix: string,
    private readonly ackTimeoutMs: number,
    /** The stream's duplicate window as it is (an existing stream keeps its own). */
    readonly duplicateWindowMs: number,
  ) {}

  static async connect(options: NatsBusOptions): Promise<NatsBus> {
    const stream = options.stream ?? 'EVENTS';
    const prefix = options.subjectPrefix ?? 'events';
    const connection = await connect({
      servers: options.servers.split(','),
      timeout: options.connectTimeoutMs ?? 5000,
      name: 'events-publisher',
    });
    let info: StreamInfo;
    try {
      const maxAge = options.maxAgeMs ?? 0;
      // JetStream refuses a duplicate window longer than the stream's max age.
      const window = Math.min(options.duplicateWindowMs ?? 120_000, maxAge || Number.POSITIVE_INFINITY);
      info = await ensureStream(await connection.jetstreamManager(), stream, prefix, {
        duplicate_window: window * NANOS_PER_MS,
        max_age: maxAge * NANOS_PER_MS,
      });
    } catch (err) {
      await connection.close();
      throw err;
    }
    const window = (info.config.duplicate_window ?? 0) / NANOS_PER_MS;
    return new NatsBus(connection, stream, prefix, options.ackTimeoutMs ?? 5000, window);
  }

  subjectFor(tenantId: string, type: string): string {
    if (!TOKEN.test(tenantId))
      throw new Error(`tenant id ${JSON.stringify(tenantId)} is not a NATS subject token`);
    return `${this.subjectPrefix}.${tenantId}.${type}`;
  }

  /**
   * Awaits the PubAck: the caller marks the event published only after JetStream stored it. A
   * `duplicate` ack (the same event id within the window: a re-publish after a crash) is stored too.
   */
  async publish(tenantId: string, event: OutgoingEvent): Promise<PublishResult> {
    const ack = await this.connection
      .jetstream()
      .publish(this.subjectFor(tenantId, event.type), codec.encode(event), {
        msgID: event.id,
        timeout: this.ackTimeoutMs,
        // Another stream capturing the subject would store it without our duplicate window.
        expect: { streamName: this.stream },
      });
    return { stream: ack.stream, seq: ack.seq, duplicate: ack.duplicate };
  }

  /**
   * Drains: publishes in flight get their acks before the connection closes. A drain that does not
   * end within `timeoutMs` (the server went away: the client is reconnecting) closes at once.
   */
  async close(timeoutMs = 5000): Promise<void> {
    if (this.connection.isClosed()) return;
    const drained = await within(
      this.connection.drain().catch(() => 'late' as const),
      timeoutMs,
    );
    if (drained === 'late' && !this.connection.isClosed()) await this.connection.close();
  }
}

/** Creates the stream when missing; an existing one is kept as configured, if it holds our subjects. */
async function ensureStream(
  manager: JetStreamManager,
  name: string,
  prefix: string,
  limits: { duplicate_window: number; max_age: number },
): Promise<StreamInfo> {
  const subject = `${prefix}.>`;
  const existing = () =>
    manager.streams.info(name).catch((err: NatsError) => {
      if (err.api_error?.err_code === STREAM_NOT_FOUND) return null;
      throw err;
    });
  const check = (info: StreamInfo) => {
    if (!info.config.subjects?.includes(subject))
      throw new Error(
        `the NATS stream ${name} exists without the subjects ${subject}; add them or remove the stream`,
      );
    return info;
  };
  const found = await existing();
  if (found) return check(found);
  try {
    return await manager.streams.add({ name, subjects: [subject], ...limits });
  } catch (err) {
    // Another instance created it between our info and add (with other limits: "already in use").
    const raced = await existing();
    if (!raced) throw err;
    return check(raced);
  }
}

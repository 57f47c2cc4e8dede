import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';

/** What the protocol gauges read from the database at each scrape (shared by every instance). */
export interface ProtocolReadings {
  oldestProcessingAgeSeconds(): Promise<number>;
  resumablePayments(): Promise<{ count: number; oldestAgeSeconds: number }>;
}

/** Prometheus metrics of one instance (a registry of its own, so tests can run several apps). */
export class Metrics {
  readonly registry = new Registry();
  readonly httpDuration = new Histogram({
    name: 'http_request_duration_seconds',
    help: 'HTTP request duration by route template, method and status',
    labelNames: ['route', 'method', 'status'] as const,
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
    registers: [this.registry],
  });
  readonly idempotency = new Counter({
    name: 'idempotency_outcomes_total',
    help: 'Idempotency engine outcomes (executed, replayed, mismatch, in_flight, lease_takeover, ...)',
    labelNames: ['operation', 'outcome'] as const,
    registers: [this.registry],
  });
  readonly purged = new Counter({
    name: 'idempotency_records_purged_total',
    help: 'Expired idempotency records deleted by the background purge',
    registers: [this.registry],
  });
  readonly gatewayCalls = new Counter({
    name: 'payment_gateway_calls_total',
    help: 'Payment gateway calls by call (charge, query, refund, refund-query) and result',
    labelNames: ['call', 'result'] as const,
    registers: [this.registry],
  });
  readonly recovererRuns = new Counter({
    name: 'payment_recoverer_runs_total',
    help: 'Runs of the payment lease recoverer by result (ok, error)',
    labelNames: ['result'] as const,
    registers: [this.registry],
  });
  readonly recovererTakeovers = new Counter({
    name: 'payment_recoverer_takeovers_total',
    help: 'Expired payment leases taken over by the recoverer',
    registers: [this.registry],
  });

  constructor() {
    collectDefaultMetrics({ register: this.registry });
  }

  /**
   * The gauges an operator watches for the protocol, read at scrape time (the database is the one
   * truth across instances): age of the oldest PROCESSING record, resumable payments waiting for
   * their client and the age of the oldest. Takeovers and replays are counters above
   * (idempotency_outcomes_total by outcome, payment_recoverer_takeovers_total).
   */
  watchProtocol(readings: ProtocolReadings): void {
    new Gauge({
      name: 'idempotency_oldest_processing_age_seconds',
      help: 'Age of the oldest committed PROCESSING idempotency record (0 when none)',
      registers: [this.registry],
      async collect() {
        // A scrape while the database is away keeps the last value (the scrape itself must answer).
        await readings.oldestProcessingAgeSeconds().then(
          (v) => this.set(v),
          () => {},
        );
      },
    });
    let resumable: Promise<{ count: number; oldestAgeSeconds: number }> | undefined;
    // One query per scrape for both resumable gauges.
    const readResumable = () => {
      resumable ??= readings.resumablePayments().finally(() => {
        setImmediate(() => {
          resumable = undefined;
        });
      });
      return resumable;
    };
    new Gauge({
      name: 'payments_resumable',
      help: 'Payments whose last attempt certainly charged nothing, waiting for their client to ask again',
      registers: [this.registry],
      async collect() {
        await readResumable().then(
          (r) => this.set(r.count),
          () => {},
        );
      },
    });
    new Gauge({
      name: 'payments_resumable_oldest_age_seconds',
      help: 'Seconds since the oldest resumable payment became resumable (0 when none)',
      registers: [this.registry],
      async collect() {
        await readResumable().then(
          (r) => this.set(r.oldestAgeSeconds),
          () => {},
        );
      },
    });
  }
}

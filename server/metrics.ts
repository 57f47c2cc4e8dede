import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';

/** What the protocol gauges read from the database at each scrape (shared by every instance). */
export interface ProtocolReadings {
  oldestProcessingAgeSeconds(): Promise<number>;
  /** Per registered effect (its operation name): resources resumable, and the oldest's age. */
  resumable(): Promise<Map<string, { count: number; oldestAgeSeconds: number }>>;
}

/** The payments' operation name: `payments_resumable` is its entry of the per-effect gauges. */
const PAYMENTS = 'payments.create';

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
   * truth across instances): age of the oldest PROCESSING record, each effect's resumable resources
   * waiting for their client and the age of the oldest (payments also under their older names). Takeovers and replays are counters above
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
    type Resumable = Map<string, { count: number; oldestAgeSeconds: number }>;
    let resumable: Promise<Resumable> | undefined;
    // One reading per scrape for all the resumable gauges.
    const readResumable = () => {
      resumable ??= readings.resumable().finally(() => {
        setImmediate(() => {
          resumable = undefined;
        });
      });
      return resumable;
    };
    // A scrape while the database is away keeps the last values (the scrape itself must answer).
    const gauge = (name: string, help: string, set: (g: Gauge<'effect'>, r: Resumable) => void) =>
      new Gauge({
        name,
        help,
        labelNames: name.startsWith('effects_') ? ['effect'] : [],
        registers: [this.registry],
        async collect() {
          await readResumable().then(
            (r) => set(this, r),
            () => {},
          );
        },
      });
    gauge(
      'effects_resumable',
      'Resources of each effect whose last attempt certainly did nothing downstream, waiting for their client',
      (g, r) => {
        for (const [effect, v] of r) g.set({ effect }, v.count);
      },
    );
    gauge(
      'effects_resumable_oldest_age_seconds',
      'Seconds since the oldest resumable resource of each effect became resumable (0 when none)',
      (g, r) => {
        for (const [effect, v] of r) g.set({ effect }, v.oldestAgeSeconds);
      },
    );
    gauge(
      'payments_resumable',
      'Payments whose last attempt certainly charged nothing, waiting for their client to ask again',
      (g, r) => g.set(r.get(PAYMENTS)?.count ?? 0),
    );
    gauge(
      'payments_resumable_oldest_age_seconds',
      'Seconds since the oldest resumable payment became resumable (0 when none)',
      (g, r) => g.set(r.get(PAYMENTS)?.oldestAgeSeconds ?? 0),
    );
  }
}

import { Counter, collectDefaultMetrics, Histogram, Registry } from 'prom-client';

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
    help: 'Payment gateway calls by call (charge, query) and result',
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
}

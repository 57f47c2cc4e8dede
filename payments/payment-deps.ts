import type { Sequelize } from 'sequelize';
import type { GatewayClient } from '../gateway/types.js';
import type { IdempotencyEngine } from '../idempotency/engine.js';

/** What the payment steps use: the database, the engine (Mode B leases), the gateway. */
export interface PaymentDeps {
  sequelize: Sequelize;
  engine: IdempotencyEngine;
  gateway: GatewayClient;
  /** Counts gateway calls by call and result (a Prometheus counter in server/). */
  onGateway?: (call: 'charge' | 'query' | 'refund' | 'refund-query', result: string) => void;
}

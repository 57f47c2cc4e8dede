import type { IncomingHttpHeaders } from 'node:http';
import type { Logger } from 'pino';
import type { Sequelize } from 'sequelize';
import type { Config } from '../core/config.js';
import type { HeaderMap } from '../core/errors.js';
import type { Metrics } from '../server/metrics.js';

/** Long-lived collaborators of a process, built once at start and shared by every request. */
export interface Services {
  config: Config;
  sequelize: Sequelize;
  logger: Logger;
  metrics: Metrics;
  /** Extension point for later parts (idempotency placeholder, payment gateway, metrics). */
  [key: string]: unknown;
}

export interface ResponseState {
  /** HTTP status of a success on the REST transport (201, 202, 204...). */
  status?: number;
  /** Headers set on the answer of either transport (Location, Idempotent-Replayed, Retry-After). */
  headers: HeaderMap;
  /** Id of the resource the operation created or changed (stored as the record's resource_id). */
  resourceId?: string;
  /** What the idempotency protocol did (executed, replayed, in_flight, ...), for the access log. */
  idempotency?: string;
}

export interface Context {
  services: Services;
  transport: 'rest' | 'trpc';
  headers: IncomingHttpHeaders;
  requestId: string;
  /** Written by procedures and the idempotency engine, read by the transports. */
  response: ResponseState;
  /** Aborted when the client goes away (used to stop waiting, never to undo work). */
  signal?: AbortSignal;
}

export function createContextValue(
  services: Services,
  transport: Context['transport'],
  headers: IncomingHttpHeaders,
  requestId: string,
): Context {
  return { services, transport, headers, requestId, response: { headers: {} } };
}

import type { Logger } from 'pino';
import type { Services } from '../routers/context.js';
import type { Metrics } from './metrics.js';

/** The procedures' services plus what only the HTTP edge uses. */
export interface AppServices extends Services {
  logger: Logger;
  metrics: Metrics;
}

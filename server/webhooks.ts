import type { Logger } from 'pino';
import type { Sequelize } from 'sequelize';
import type { Config } from '../core/config.js';
import type { Jobs } from '../core/jobs.js';
import { WebhookDeliveries } from '../events/webhook-worker.js';
import { every, type PauseLog } from './background.js';

/** How often the dispatcher looks for due webhook deliveries (plus up to one job-runner poll). */
export const WEBHOOK_DISPATCH_MS = 500;
/** A dispatch run only claims and starts attempts: one still going after this is a dead instance's. */
const WEBHOOK_DISPATCH_EXPIRE_MS = 30_000;

/**
 * Webhook deliveries on the job library (docs/DECISIONS.md "Webhook deliveries"): a recurring
 * dispatch run, one at a time across instances, that claims due deliveries under a lease and starts
 * their attempts on the instance that claimed them.
 */
export async function startWebhookDeliveries(
  jobs: Jobs,
  pauses: PauseLog,
  deps: { config: Config; sequelize: Sequelize; logger: Logger },
): Promise<WebhookDeliveries> {
  const deliveries = new WebhookDeliveries({
    sequelize: deps.sequelize,
    logger: deps.logger,
    settings: deps.config,
  });
  await every(
    jobs,
    pauses,
    'webhook-dispatch',
    { intervalMs: WEBHOOK_DISPATCH_MS, expireInMs: WEBHOOK_DISPATCH_EXPIRE_MS },
    (signal) => deliveries.dispatch(signal),
  );
  return deliveries;
}

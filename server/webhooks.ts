import type { Logger } from 'pino';
import type { Sequelize } from 'sequelize';
import type { Config } from '../core/config.js';
import type { Jobs } from '../core/jobs.js';
import { WebhookDeliveries } from '../events/webhook-worker.js';
import { every, type PauseLog } from './background.js';

/** One dispatch run claims for this long, every DISPATCH_POLL_MS, then the next run follows. */
const DISPATCH_RUN_MS = 5000;
const DISPATCH_POLL_MS = 250;
const DISPATCH_CHAIN_GAP_MS = 100;
/** A run still going after this is a dead instance's: another instance runs the chain on. */
const DISPATCH_EXPIRE_MS = 15_000;

/**
 * Webhook deliveries on the job library (docs/DECISIONS.md "Webhook deliveries"): a recurring
 * dispatch run, one at a time across instances, that for 5 s claims due deliveries under a lease every
 * 250 ms and starts their attempts on the instance that claimed them. A run whose instance died holds
 * the chain until the job library runs it again elsewhere (its expiry plus a maintenance round).
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
    { intervalMs: DISPATCH_CHAIN_GAP_MS, expireInMs: DISPATCH_EXPIRE_MS },
    (signal) => deliveries.dispatchFor(DISPATCH_RUN_MS, DISPATCH_POLL_MS, signal),
  );
  return deliveries;
}

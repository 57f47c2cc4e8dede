import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Logger } from 'pino';
import type { Config } from '../core/config.js';
import {
  applicationName,
  checkSessionBounds,
  type Database,
  openDatabase,
  whenWritable,
} from '../core/database.js';
import { onDropConnections, setFailpoints } from '../core/failpoints.js';
import type { Jobs } from '../core/jobs.js';
import { createLogger } from '../core/logger.js';
import { purgeExpiredEvents } from '../events/feed.js';
import { closeSubscriptions } from '../events/feed-waker.js';
import type { WebhookDeliveries } from '../events/webhook-worker.js';
import { createGatewayClient } from '../gateway/client.js';
import { type GatewaySimulator, startGatewaySimulator } from '../gateway/simulator.js';
import { registeredEffects } from '../idempotency/effect.js';
import { closeExpiredResumables } from '../idempotency/effect-expire.js';
import { resumableByEffect, sweepExpired } from '../idempotency/effect-recover.js';
import { Placeholder } from '../idempotency/placeholder.js';
import { purgeExpired } from '../idempotency/purge-expired.js';
import { oldestProcessingAgeSeconds } from '../idempotency/readings.js';
import { IdBlocks } from '../models/id-blocks.js';
import { initModels } from '../models/index.js';
import { migrate } from '../models/migrate.js';
import type { PaymentDeps } from '../payments/payment-deps.js';
import { createApp } from './app.js';
import type { AppServices } from './app-services.js';
import { every, PauseLog } from './background.js';
import {
  backgroundDeps,
  startBackgroundEffects,
  startExportPurge,
  sweepBackground,
} from './background-effects.js';
import { createEngine } from './engine-from-config.js';
import { answerClientError, answerExpectation } from './http-errors.js';
import { PURGE_EXPIRE_MS, RECOVERER_EXPIRE_MS, settingUpJobs, startJobs } from './jobs.js';
import { Metrics } from './metrics.js';
import { startNatsRelay } from './nats-relay.js';
import { startWebhookDeliveries } from './webhooks.js';

export interface RunningServer {
  url: string;
  port: number;
  services: AppServices;
  /** Where later background work (exports, webhook deliveries) registers its tasks and adds jobs. */
  jobs: Jobs;
  close(): Promise<void>;
}

/**
 * Starts one service instance: database (embedded or DATABASE_URL), migrations, HTTP server.
 * Used by `npm start` and by tests (port 0), so both run the same start-up path.
 */
export async function startServer(config: Config): Promise<RunningServer> {
  const logger = createLogger(config.LOG_LEVEL);
  if (config.FAILPOINTS) {
    setFailpoints(config.FAILPOINTS);
    logger.warn({ failpoints: config.FAILPOINTS }, 'failpoints enabled (test only)');
  }
  for (const name of config.devDefaults) {
    logger.warn(`${name} is not set: using the dev-only default (refused when NODE_ENV=production)`);
  }
  if (config.NODE_ENV === 'production' && !config.PAYMENT_GATEWAY_URL) {
    // CONTRACT section 8 lets this combination start; it must not pass unnoticed.
    logger.warn(
      'PAYMENT_GATEWAY_URL is not set with NODE_ENV=production: payments and refunds go to the bundled simulator, which moves no money',
    );
  }
  const db = await openDatabase(config, (line) => logger.debug({ source: 'postgres' }, line));
  // On a cluster, start-up may meet a failover: wait (bounded) for a writable leader, then migrate.
  const applied = await whenWritable(
    db.sequelize,
    config.DB_STARTUP_TIMEOUT_MS,
    async () => {
      await checkSessionBounds(db.sequelize, {
        waitMs: config.IDEMPOTENCY_WAIT_MS,
        leaseMs: config.IDEMPOTENCY_LEASE_MS,
      });
      return migrate(db.sequelize);
    },
    (why) => logger.warn({ why }, 'waiting for a writable database'),
  ).catch(async (err: unknown) => {
    await db.close().catch(() => {});
    throw err;
  });
  if (applied.length > 0) logger.info({ applied }, 'migrations applied');
  initModels(db.sequelize);

  onDropConnections(async () => {
    // From a connection of its own; the server ends every other connection of this process.
    await db.sequelize.query(
      'SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1 AND pid <> pg_backend_pid()',
      { bind: [applicationName()] },
    );
  });
  const placeholder = config.REDIS_URL ? new Placeholder(config.REDIS_URL, 30000, logger) : undefined;
  const metrics = new Metrics();
  metrics.watchProtocol({
    oldestProcessingAgeSeconds: () => oldestProcessingAgeSeconds(db.sequelize),
    resumable: () => resumableByEffect(db.sequelize),
  });
  const idempotency = createEngine(db.sequelize, config, placeholder, logger);
  // No PAYMENT_GATEWAY_URL: the bundled simulator, in this process, on a loopback port of its own.
  let simulator: GatewaySimulator | undefined;
  let gatewayUrl = config.PAYMENT_GATEWAY_URL;
  if (!gatewayUrl) {
    simulator = await startGatewaySimulator({ host: '127.0.0.1', port: 0 });
    gatewayUrl = simulator.url;
  }
  const gateway = createGatewayClient({ baseUrl: gatewayUrl, timeoutMs: config.GATEWAY_TIMEOUT_MS });
  const payments: PaymentDeps = {
    sequelize: db.sequelize,
    engine: idempotency,
    gateway,
    onGateway: (call, result) => metrics.gatewayCalls.inc({ call, result }),
  };
  const services: AppServices = {
    config,
    sequelize: db.sequelize,
    logger,
    metrics,
    idempotency,
    ids: new IdBlocks(db.sequelize),
    payments,
    countOutcome: (operation, outcome) => metrics.idempotency.inc({ operation, outcome }),
  };
  const { jobs, webhooks } = await settingUpJobs(
    () => startBackgroundWork({ config, db, logger, metrics, payments, services }),
    config.DB_STARTUP_TIMEOUT_MS,
  ).catch(async (err: unknown) => {
    await db.close().catch(() => {});
    throw err;
  });
  const app = createApp(services);
  const server = http.createServer(app);
  server.keepAliveTimeout = 5000;
  server.on('clientError', answerClientError);
  server.on('checkExpectation', answerExpectation);
  await new Promise<void>((resolve, reject) => {
    // The variables named, as for an invalid value (CONTRACT section 8): a HOST that does not
    // resolve, an address not of this machine, a PORT in use.
    server.once('error', (err: NodeJS.ErrnoException) =>
      reject(
        new Error(`cannot listen on HOST=${config.HOST} PORT=${config.PORT}: ${err.code ?? err.message}`),
      ),
    );
    server.listen(config.PORT, config.HOST, resolve);
  });
  const { port } = server.address() as AddressInfo;
  const url = `http://${config.HOST}:${port}`;
  logger.info({ url }, 'listening');

  let closing: Promise<void> | undefined;
  return {
    url,
    port,
    services,
    jobs,
    close() {
      closing ??= (async () => {
        // Stop accepting, let in-flight requests finish (bounded), then release the pool.
        closeSubscriptions(db.sequelize); // event streams end now; their clients reconnect elsewhere
        const drained = new Promise<void>((resolve) => server.close(() => resolve()));
        server.closeIdleConnections();
        const timer = setTimeout(() => server.closeAllConnections(), config.SHUTDOWN_TIMEOUT_MS);
        await drained;
        clearTimeout(timer);
        await jobs.stop(config.SHUTDOWN_TIMEOUT_MS);
        // The webhook attempts this instance started record their result before the pool closes (one
        // cut off stays leased and is sent again by another instance after its lease).
        await webhooks.drain(config.SHUTDOWN_TIMEOUT_MS);
        await placeholder?.close();
        await gateway.close();
        await simulator?.close();
        await db.close();
      })();
      return closing;
    },
  };
}

/**
 * The recoverer's closure of resumable resources whose key has expired, for every effect that only
 * its own key can resume (refunds: idempotency/effect-expire.ts). A key counts as expired a lease
 * after its TTL, for the clocks of the service's and the database's hosts.
 */
async function closeExpiredKeys(config: Config, deps: PaymentDeps, metrics: Metrics, logger: Logger) {
  let closed = 0;
  for (const effect of registeredEffects()) {
    const expiry = effect.closedOnKeyExpiry;
    if (!expiry) continue;
    const keyTtlMs = expiry.ttlHours(config) * 3_600_000 + config.IDEMPOTENCY_LEASE_MS;
    const operation = effect.name;
    closed += await closeExpiredResumables(effect, deps, keyTtlMs, 20, {
      onResult: (id, result) => {
        if (result === 'closed') metrics.idempotency.inc({ operation, outcome: 'closed_key_expired' });
        if (result === 'done')
          logger.error(
            { id, operation },
            'resumable, its key expired, but done downstream: run npm run reconcile -- --repair',
          );
      },
      onError: (id, err) => logger.error({ err, id, operation }, 'closing failed; retried next round'),
    });
  }
  return closed;
}

/**
 * The job runner and this service's recurring work on it: the purge of expired records (with their
 * tombstones) and the recoverer's sweep of every registered effect (payments, refunds), with the
 * closure of resumable refunds whose key expired. Stops the runner again if any of it fails.
 */
async function startBackgroundWork(deps: {
  config: Config;
  db: Database;
  logger: Logger;
  metrics: Metrics;
  payments: PaymentDeps;
  services: AppServices;
}): Promise<{ jobs: Jobs; webhooks: WebhookDeliveries }> {
  const { config, db, logger, metrics, payments } = deps;
  const jobs = await startJobs(db.url, logger);
  try {
    const pauses = new PauseLog(logger);
    // A run works off the whole backlog, paced (PURGE_BUSY_PERCENT); the next run starts only after it.
    await every(
      jobs,
      pauses,
      'purge-expired',
      { intervalMs: config.PURGE_INTERVAL_MS, expireInMs: PURGE_EXPIRE_MS },
      async (signal) => {
        const purged = await purgeExpired(db.sequelize, {
          maxBatches: Number.POSITIVE_INFINITY,
          busyPercent: config.PURGE_BUSY_PERCENT,
          tombstoneDays: config.IDEMPOTENCY_TOMBSTONE_DAYS,
          signal,
          onBatch: (deleted) => {
            metrics.purged.inc(deleted);
            metrics.idempotency.inc({ operation: 'all', outcome: 'purged' }, deleted);
          },
        });
        if (purged > 0) logger.info({ purged }, 'expired idempotency records purged');
      },
    );
    // Events older than EVENT_RETENTION_DAYS (CONTRACT section 12), a batch at a time until none is left,
    // paced as the records' purge (PURGE_BUSY_PERCENT).
    await every(
      jobs,
      pauses,
      'purge-events',
      { intervalMs: config.PURGE_INTERVAL_MS, expireInMs: PURGE_EXPIRE_MS },
      async (signal) => {
        const purged = await purgeExpiredEvents(db.sequelize, config.EVENT_RETENTION_DAYS, {
          busyPercent: config.PURGE_BUSY_PERCENT,
          signal,
        });
        if (purged > 0) logger.info({ purged }, 'events past their retention purged');
      },
    );
    // Background effects (exports) first: the recoverer adds their jobs.
    const background = await startBackgroundEffects(jobs, backgroundDeps(config, db.sequelize), logger);
    deps.services.background = background;
    await every(
      jobs,
      pauses,
      'effect-recoverer',
      { intervalMs: config.RECOVERER_INTERVAL_MS, expireInMs: RECOVERER_EXPIRE_MS },
      async () => {
        try {
          // Every registered effect (payments, refunds, ...): one sweep each, query first.
          // Each takeover is counted when it happens, before its resource can become final: counted
          // at the end of the run, a reader who saw the payment final could still read 0.
          let taken = 0;
          for (const effect of registeredEffects()) {
            taken += await sweepExpired(
              effect,
              payments,
              20,
              (scopeKey, err) =>
                logger.error(
                  { err, scopeKey, operation: effect.name },
                  'recovery failed; retried next round',
                ),
              () => {
                metrics.recovererTakeovers.inc();
                metrics.idempotency.inc({ operation: effect.name, outcome: 'lease_takeover' });
              },
            );
          }
          const closed = await closeExpiredKeys(config, payments, metrics, logger);
          // Every background effect's free rows (exports): a job each, continued from its checkpoint.
          const continued = await sweepBackground(background, db.sequelize);
          metrics.recovererRuns.inc({ result: 'ok' });
          if (taken > 0) logger.info({ taken }, 'expired effect leases taken over');
          if (closed > 0) logger.info({ closed }, 'resumable resources whose key expired closed');
          if (continued > 0) logger.info({ continued }, 'background work without a live worker continued');
        } catch (err) {
          metrics.recovererRuns.inc({ result: 'error' });
          throw err;
        }
      },
    );
    await startNatsRelay({ config, jobs, pauses, sequelize: db.sequelize, logger });
    const webhooks = await startWebhookDeliveries(jobs, pauses, { config, sequelize: db.sequelize, logger });
    await startExportPurge(jobs, pauses, config, db.sequelize, logger);
    return { jobs, webhooks };
  } catch (err) {
    // Set-up failed half way: the job runner's pool and workers must not outlive the start.
    await jobs.stop(config.SHUTDOWN_TIMEOUT_MS).catch(() => {});
    throw err;
  }
}

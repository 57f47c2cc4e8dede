import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Config } from '../core/config.js';
import { openDatabase } from '../core/database.js';
import { createLogger } from '../core/logger.js';
import { createGatewayClient } from '../gateway/client.js';
import { type GatewaySimulator, startGatewaySimulator } from '../gateway/simulator.js';
import { IdempotencyEngine } from '../idempotency/engine.js';
import { Placeholder } from '../idempotency/placeholder.js';
import { purgeExpired } from '../idempotency/purge-expired.js';
import { ResponseCipher } from '../idempotency/response-cipher.js';
import { initModels } from '../models/index.js';
import { migrate } from '../models/migrate.js';
import type { PaymentDeps } from '../payments/create-payment.js';
import { recoverExpiredPayments } from '../payments/recoverer.js';
import type { Services } from '../routers/context.js';
import { createApp } from './app.js';
import { every } from './background.js';
import { Metrics } from './metrics.js';

export interface RunningServer {
  url: string;
  port: number;
  services: Services;
  close(): Promise<void>;
}

/**
 * Starts one service instance: database (embedded or DATABASE_URL), migrations, HTTP server.
 * Used by `npm start` and by tests (port 0), so both run the same start-up path.
 */
export async function startServer(config: Config): Promise<RunningServer> {
  const logger = createLogger(config.LOG_LEVEL);
  for (const name of config.devDefaults) {
    logger.warn(`${name} is not set: using the dev-only default (refused when NODE_ENV=production)`);
  }
  const db = await openDatabase(config, (line) => logger.debug({ source: 'postgres' }, line));
  const applied = await migrate(db.sequelize);
  if (applied.length > 0) logger.info({ applied }, 'migrations applied');
  initModels(db.sequelize);

  const previousKeys = Object.fromEntries(
    (config.RESPONSE_ENCRYPTION_PREVIOUS_KEYS ?? '')
      .split(',')
      .filter(Boolean)
      .map((pair) => [pair.split(':')[0], Buffer.from(pair.split(':')[1], 'base64')]),
  );
  const cipher = new ResponseCipher(
    config.RESPONSE_ENCRYPTION_KEY_ID,
    config.RESPONSE_ENCRYPTION_KEY,
    previousKeys,
  );
  const placeholder = config.REDIS_URL ? new Placeholder(config.REDIS_URL, 30000, logger) : undefined;
  const metrics = new Metrics();
  const idempotency = new IdempotencyEngine(
    db.sequelize,
    config,
    cipher,
    logger,
    placeholder,
    (operation, outcome) => metrics.idempotency.inc({ operation, outcome }),
  );
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
    config,
    logger,
    onGateway: (call, result) => metrics.gatewayCalls.inc({ call, result }),
  };
  const services: Services = {
    config,
    sequelize: db.sequelize,
    logger,
    metrics,
    idempotency,
    gateway,
    payments,
    simulator,
  };
  const jobs = [
    every('purge-expired', config.PURGE_INTERVAL_MS, logger, async () => {
      const purged = await purgeExpired(db.sequelize);
      metrics.purged.inc(purged);
      metrics.idempotency.inc({ operation: 'all', outcome: 'purged' }, purged);
      if (purged > 0) logger.info({ purged }, 'expired idempotency records purged');
    }),
    every('payment-recoverer', config.RECOVERER_INTERVAL_MS, logger, async () => {
      try {
        const taken = await recoverExpiredPayments(payments);
        metrics.recovererRuns.inc({ result: 'ok' });
        metrics.recovererTakeovers.inc(taken);
        if (taken > 0) logger.info({ taken }, 'expired payment leases taken over');
      } catch (err) {
        metrics.recovererRuns.inc({ result: 'error' });
        throw err;
      }
    }),
  ];
  const app = createApp(services);
  const server = http.createServer(app);
  server.keepAliveTimeout = 5000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
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
    close() {
      closing ??= (async () => {
        // Stop accepting, let in-flight requests finish (bounded), then release the pool.
        const drained = new Promise<void>((resolve) => server.close(() => resolve()));
        server.closeIdleConnections();
        const timer = setTimeout(() => server.closeAllConnections(), config.SHUTDOWN_TIMEOUT_MS);
        await drained;
        clearTimeout(timer);
        await Promise.all(jobs.map((job) => job.stop()));
        await placeholder?.close();
        await gateway.close();
        await simulator?.close();
        await db.close();
      })();
      return closing;
    },
  };
}

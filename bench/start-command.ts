/**
 * What `npm start` runs, so that the benchmark measures the same process a user starts: the start
 * script (package.json) builds with tsc, then `exec node <flags> dist/server/main.js`. The flags
 * (the heap limits) are read from that script, not repeated here.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { MAX_IN_FLIGHT, MAX_RETAINED, SECRETS, WAIT_MS } from './settings.js';

export interface StartCommand {
  /** node's own flags from the start script (e.g. --max-old-space-size). */
  flags: string[];
  /** The built entry point, relative to the project root. */
  entry: string;
}

/** `root`: the checkout whose start script is read (default: this one). */
export function startCommand(root = '.'): StartCommand {
  const pkg = JSON.parse(readFileSync(`${root}/package.json`, 'utf8')) as { scripts: Record<string, string> };
  const match = /exec node ((?:--\S+ )*)(dist\/\S+\.js)$/.exec(pkg.scripts.start ?? '');
  if (!match)
    throw new Error(
      `package.json's start script is not "… && exec node [flags] dist/….js": ${pkg.scripts.start}`,
    );
  return { flags: match[1].trim().split(/\s+/).filter(Boolean), entry: match[2] };
}

/**
 * Builds what `npm start` builds (npm run build), and the benchmark's preload (bench/probe.ts) next
 * to it in .tmp/probe/, so that no TypeScript loader runs in the measured process. Returns the probe.
 */
export function buildForBench(): string {
  execFileSync('npm', ['run', '-s', 'build'], { stdio: 'inherit' });
  execFileSync(process.execPath, ['node_modules/typescript/bin/tsc', '-p', 'bench/tsconfig.probe.json'], {
    stdio: 'inherit',
  });
  return './.tmp/probe/probe.js';
}

/** The service's environment in the benchmark (its secrets, bounds and caps), as `npm start` reads it. */
export function serviceEnv(o: {
  databaseUrl: string;
  gatewayUrl: string;
  port: number;
}): Record<string, string> {
  return {
    ...SECRETS,
    NODE_ENV: 'test',
    LOG_LEVEL: 'warn',
    DATABASE_URL: o.databaseUrl,
    PAYMENT_GATEWAY_URL: o.gatewayUrl,
    HOST: '127.0.0.1',
    PORT: String(o.port),
    IDEMPOTENCY_WAIT_MS: String(WAIT_MS),
    IDEMPOTENCY_MAX_RETAINED: String(MAX_RETAINED),
    IDEMPOTENCY_MAX_IN_FLIGHT: String(MAX_IN_FLIGHT),
    // The benchmark runs the purge itself (purge scenario); the service's own job stays idle.
    PURGE_INTERVAL_MS: String(86_400_000),
  };
}

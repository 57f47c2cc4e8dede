import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';
import { readCliArgs } from '../server/cli-args.js';

/** Fixed facts of every run: tenant, token id ranges, the service's limits, its secrets. */
export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
export const STORM_SIZE = 200;
export const TENANT = 'bench';
export const ADMINS = 1000;
export const USERS = 1000;
// Token user ids far above any id the run creates (a created row's role would win over the token's).
export const ADMIN_BASE = 9_000_000_000;
export const USER_BASE = 9_100_000_000;
export const STORM_BASE = 9_200_000_000;
export const WAIT_MS = 1000;
export const MAX_RETAINED = 1_000_000;
export const MAX_IN_FLIGHT = 20;
/** The default IDEMPOTENCY_MAX_RETAINED: what the retained cap costs a user close to it. */
export const DEFAULT_MAX_RETAINED = 10_000;
export const SECRETS = {
  JWT_SECRET: 'bench-jwt-secret-0123456789abcdef',
  IDEMPOTENCY_HMAC_KEY: 'bench-hmac-key-0123456789abcdef',
  RESPONSE_ENCRYPTION_KEY: Buffer.alloc(32, 5).toString('base64'),
};

export const SCENARIOS = [
  'bare',
  'peer',
  'peer-token',
  'idem-users',
  'idem-orders',
  'replay',
  'trpc',
  'storm',
  'payments',
  'keyed-paths',
  'roundtrips',
  'pgbench',
  'growth',
  'purge',
  'outbox',
  'events',
  'refunds',
  'export',
] as const;
export type ScenarioId = (typeof SCENARIOS)[number];

const QUICK_PARAMS = {
  // Two short rounds rather than one: the baseline is not always measured first.
  rounds: 2,
  segment: 1,
  growthRounds: 1,
  growthSegment: 2,
  pairedRounds: 2,
  pairedSegment: 1,
  short: 2,
  warmup: 1,
  stormRounds: 3,
  replayKeys: 256,
  growthSeeds: 256,
  growthSmall: 10_000,
  growthBig: 100_000,
  purgeRows: 100_000,
  purgeMax: 60,
  purgeSegment: 6,
  countN: 20,
  paymentOrders: 10_000,
  claimSamples: 200,
  eventOrders: 20,
  refundPayments: 1000,
  exportRows: 100_000,
  exportQuietSegment: 3,
};
const FULL_PARAMS: typeof QUICK_PARAMS = {
  rounds: 4,
  segment: 3,
  growthRounds: 3,
  growthSegment: 3,
  // The scenarios that compare two arms (outbox on ÷ off, refund ÷ payment): their ratios moved ±4%
  // (outbox, 0.897–0.980 over seven runs) and ±10% (refund, 0.96–1.16 over six) between runs of 4
  // rounds of 3 s; twice the rounds of a longer segment, so that a run's value is its cost, not the
  // machine's drift.
  pairedRounds: 8,
  pairedSegment: 4,
  short: 8,
  warmup: 3,
  stormRounds: 20,
  replayKeys: 2048,
  growthSeeds: 1024,
  growthSmall: 10_000,
  growthBig: 1_000_000,
  purgeRows: 1_000_000,
  // Wall time, a third of it without the purge: at 25% busy 1M records took 157 s of purging on a
  // fast day and more than 200 s on a slow one, which 300 s of wall time did not leave.
  purgeMax: 480,
  purgeSegment: 12,
  countN: 200,
  paymentOrders: 60_000,
  claimSamples: 1000,
  eventOrders: 50,
  refundPayments: 5000,
  exportRows: 1_000_000,
  exportQuietSegment: 8,
};
export type Params = typeof QUICK_PARAMS;

const positive = z.coerce.number().int().positive();
const schema = z.object({
  quick: z.boolean().default(false),
  profile: z.boolean().default(false),
  only: z
    .string()
    .transform((v) => v.split(',').filter(Boolean))
    .pipe(z.array(z.enum([...SCENARIOS, 'plain'])))
    .optional(),
  rounds: positive.optional(),
  segment: positive.optional(),
  connections: positive.default(16),
  // What-if experiments, off by default (see docs/BENCHMARKS.md): any service variable
  // (--server-env=DB_POOL_MAX=16, repeatable) and the purge's pacing (--purge-busy-percent=100: back to back).
  'server-env': z.array(z.string().regex(/^[A-Z_][A-Z0-9_]*=/, 'must be NAME=VALUE')).default([]),
  'purge-busy-percent': z.coerce.number().int().min(1).max(100).optional(),
  // The embedded server's clients over loopback TCP instead of its Unix socket (the default).
  'db-tcp': z.boolean().default(false),
});

/** The options of one run, as parsed from the command line. */
export interface Options {
  QUICK: boolean;
  PROFILE: boolean;
  ONLY: string[] | undefined;
  P: Params;
  ROUNDS: number;
  SEGMENT: number;
  CONNECTIONS: number;
  SERVER_ENV: Record<string, string>;
  /** The purge's pacing; undefined: the service's default (PURGE_BUSY_PERCENT). */
  PURGE_BUSY_PERCENT: number | undefined;
  DB_TCP: boolean;
}

export const USAGE =
  'usage: npm run bench -- [--quick] [--only=<scenario,...>] [--profile] [--rounds=N] [--segment=S] [--connections=N] [--server-env=NAME=VALUE ...] [--purge-busy-percent=N] [--db-tcp]';

/** Command-line options through util.parseArgs (strict) and zod; a problem is one line and exit 2. */
export function parseOptions(argv: string[]): Options | { problem: string } {
  const args = readCliArgs(
    {
      quick: { type: 'boolean' },
      profile: { type: 'boolean' },
      only: { type: 'string' },
      rounds: { type: 'string' },
      segment: { type: 'string' },
      connections: { type: 'string' },
      'server-env': { type: 'string', multiple: true },
      'purge-busy-percent': { type: 'string' },
      'db-tcp': { type: 'boolean' },
    },
    schema,
    argv,
  );
  if (!args.ok) return { problem: args.problem };
  const v = args.values;
  const P = v.quick ? QUICK_PARAMS : FULL_PARAMS;
  return {
    QUICK: v.quick,
    PROFILE: v.profile,
    ONLY: v.only,
    P,
    ROUNDS: v.rounds ?? P.rounds,
    SEGMENT: v.segment ?? P.segment,
    CONNECTIONS: v.connections,
    SERVER_ENV: Object.fromEntries(
      v['server-env'].map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]),
    ),
    PURGE_BUSY_PERCENT: v['purge-busy-percent'],
    DB_TCP: v['db-tcp'],
  };
}

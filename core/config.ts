import { z } from 'zod';
import { failpointsRefused, parseFailpoints } from './failpoints.js';

// Dev-only defaults: fixed (never generated at start, which would invalidate every token on restart)
// and refused when NODE_ENV=production.
const DEV_JWT_SECRET = 'dev-only-jwt-secret-change-me-0123456789';
const DEV_HMAC_KEY = 'dev-only-idempotency-hmac-key-change-me';
const DEV_RESPONSE_KEY = Buffer.alloc(32, 7).toString('base64');

/** The purge's pacing by default (the benchmark's purge scenario uses it too). */
export const DEFAULT_PURGE_BUSY_PERCENT = 25;
/** An export's pacing by default (docs/DECISIONS.md "Exports"). */
export const DEFAULT_EXPORT_BUSY_PERCENT = 50;

/**
 * A number from the environment as written in `pattern` (a JSON number is taken as is): JavaScript's
 * coercion would read `0x0CA5`, `1e3` or ` 5` as numbers, so anything else is refused. The union
 * carries the message too: text the pattern refuses fails both branches, and zod reports that as the
 * union's own issue ("Invalid input"), not the regex's.
 */
const written = (pattern: RegExp, message: string) =>
  z.union([z.number(), z.string().regex(pattern, message).transform(Number)], { error: message });

/** A decimal integer in [min, max]: digits only, an optional minus. */
const intIn = (min: number, max: number) =>
  written(/^-?[0-9]{1,16}$/, 'must be a decimal integer').pipe(z.number().int().min(min).max(max));
const int = (def: number, min: number, max: number) => intIn(min, max).default(def);

/** A positive decimal number (hours: a fraction allowed) up to max; digits and one point only. */
const hours = (def: number, max: number) =>
  written(/^[0-9]{1,9}(\.[0-9]{1,9})?$/, 'must be a decimal number')
    .pipe(z.number().positive().max(max))
    .default(def);

/** Standard base64 of exactly 32 bytes: 43 characters and one `=`; an id:key pair of the previous keys. */
const BASE64_32 = '[A-Za-z0-9+/]{43}=';
const KEY_PAIR = `[A-Za-z0-9_-]{1,16}:${BASE64_32}`;

const schema = z.object({
  NODE_ENV: z.enum(['development', 'production', 'test']).default('development'),
  PORT: int(3000, 0, 65535),
  HOST: z.string().min(1).default('127.0.0.1'),
  DATABASE_URL: z
    .string()
    .regex(/^postgres(ql)?:\/\//, 'must be a postgres:// URL')
    .optional(),
  EMBEDDED_PG_PORT: int(54329, 1, 65535),
  DATA_DIR: z.string().min(1).default('.data'),
  JWT_SECRET: z.string().min(16, 'must be at least 16 characters').optional(),
  TOKEN_TTL_SECONDS: int(3600, 60, 7 * 24 * 3600),
  IDEMPOTENCY_HMAC_KEY: z.string().min(16, 'must be at least 16 characters').optional(),
  RESPONSE_ENCRYPTION_KEY: z
    .string()
    .regex(new RegExp(`^${BASE64_32}$`), 'must be 32 bytes, base64-encoded')
    .optional(),
  RESPONSE_ENCRYPTION_KEY_ID: z
    .string()
    .regex(/^[A-Za-z0-9_-]{1,16}$/)
    .default('k1'),
  // Keys that still decrypt older stored responses after a rotation: "id:base64,id:base64", each
  // exactly 32 bytes (AES-256): a wrong length would only show when an old record is replayed.
  RESPONSE_ENCRYPTION_PREVIOUS_KEYS: z
    .string()
    .regex(
      new RegExp(`^${KEY_PAIR}(,${KEY_PAIR})*$`),
      'must be id:base64 pairs, each key 32 bytes, base64-encoded',
    )
    .optional(),
  REDIS_URL: z
    .string()
    .regex(/^rediss?:\/\//, 'must be a redis:// URL')
    .optional(),
  PAYMENT_GATEWAY_URL: z
    .url({ protocol: /^https?$/, error: 'must be an http:// or https:// URL' })
    .optional(),
  // Unset: derived from the lease (see loadConfig), so that any allowed lease starts.
  GATEWAY_TIMEOUT_MS: intIn(10, 600000).optional(),
  IDEMPOTENCY_WAIT_MS: int(1000, 0, 60000),
  IDEMPOTENCY_LEASE_MS: int(30000, 100, 3600000),
  IDEMPOTENCY_TTL_HOURS: hours(24, 24 * 365),
  PAYMENT_IDEMPOTENCY_TTL_HOURS: hours(168, 24 * 365 * 10),
  // At least a day: 0 would forget purged keys at once, and the contract refuses them (40905).
  IDEMPOTENCY_TOMBSTONE_DAYS: int(30, 1, 3650),
  IDEMPOTENCY_MAX_IN_FLIGHT: int(20, 1, 100000),
  IDEMPOTENCY_MAX_RETAINED: int(10000, 1, 10000000),
  PURGE_INTERVAL_MS: int(60000, 100, 86400000),
  // The share of wall time the purge may spend deleting (100: batches back to back).
  PURGE_BUSY_PERCENT: int(DEFAULT_PURGE_BUSY_PERCENT, 1, 100),
  RECOVERER_INTERVAL_MS: int(5000, 100, 3600000),
  MAX_BODY_BYTES: int(65536, 256, 10 * 1024 * 1024),
  SHUTDOWN_TIMEOUT_MS: int(10000, 100, 600000),
  DB_POOL_MAX: int(10, 1, 200),
  // How long start-up waits for a writable database (a failover in progress) before giving up.
  DB_STARTUP_TIMEOUT_MS: int(60000, 0, 3600000),
  // Section 12: one webhook attempt's time-out, and attempts before a delivery is FAILED.
  WEBHOOK_TIMEOUT_MS: int(5000, 100, 60000),
  WEBHOOK_MAX_ATTEMPTS: int(12, 1, 100),
  // The first retry's wait; later waits scale with it (5000: the contract's 5 s, 30 s, 2 min, ... hourly).
  // Tests shorten it; nothing else should.
  WEBHOOK_RETRY_BASE_MS: int(5000, 10, 600000),
  // With NODE_ENV=production, endpoints on private networks are refused (SSRF) unless this is 1.
  WEBHOOK_ALLOW_PRIVATE_NETWORKS: z.enum(['0', '1']).default('0'),
  // Unset: no bus. One URL or a comma-separated list of servers (the client fails over between them).
  NATS_URL: z
    .string()
    .regex(
      /^(nats|tls):\/\/[^\s,]+(,(nats|tls):\/\/[^\s,]+)*$/,
      'must be nats:// or tls:// URLs, comma-separated',
    )
    .optional(),
  EVENT_RETENTION_DAYS: int(30, 1, 3650),
  // events.onEvent streams one instance serves at once; one more is refused (503, its client retries).
  EVENT_MAX_SUBSCRIBERS: int(2000, 1, 1000000),
  // Section 11: the largest export (more matching rows: FAILED "TOO_MANY_ROWS"), and how long a
  // finished export's file is kept (hours; a fraction is allowed, e.g. for tests).
  EXPORT_MAX_ROWS: int(1000000, 1, 100000000),
  EXPORT_TTL_HOURS: hours(24, 24 * 365),
  // The share of wall time an export's worker spends on its parts (100: back to back), as the purge's.
  EXPORT_BUSY_PERCENT: int(DEFAULT_EXPORT_BUSY_PERCENT, 1, 100),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  // Test-only fault injection (core/failpoints.ts); refused with NODE_ENV=production.
  FAILPOINTS: z.string().optional(),
  FAILPOINTS_CONTROL: z.enum(['0', '1']).default('0'),
});

type Raw = z.infer<typeof schema>;
export type Config = Omit<
  Raw,
  'JWT_SECRET' | 'IDEMPOTENCY_HMAC_KEY' | 'RESPONSE_ENCRYPTION_KEY' | 'GATEWAY_TIMEOUT_MS'
> & {
  GATEWAY_TIMEOUT_MS: number;
  JWT_SECRET: string;
  IDEMPOTENCY_HMAC_KEY: string;
  RESPONSE_ENCRYPTION_KEY: Buffer;
  /** Names of secrets that fell back to their dev-only default (a warning is logged at start). */
  devDefaults: string[];
};

export class ConfigError extends Error {}

/**
 * One executor's worst case must fit inside its lease, or a takeover could start while it still
 * works: a charge that times out, the query that follows it (each GATEWAY_TIMEOUT_MS), then Tx 2.
 * Two gateway time-outs may use at most this share of the lease; the rest is left for Tx 2 and for
 * the clocks of the instances.
 */
const GATEWAY_SHARE_OF_LEASE = 3 / 4;

/** The gateway time-out that follows from a lease: at most 5 s, and small enough to fit twice. */
export const derivedGatewayTimeout = (leaseMs: number) =>
  Math.max(10, Math.min(5000, Math.floor((leaseMs * GATEWAY_SHARE_OF_LEASE) / 2)));

/**
 * Parses the environment once; throws ConfigError with one line naming every invalid or missing
 * variable (CONTRACT section 8).
 */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const cleaned = Object.fromEntries(Object.entries(env).filter(([, v]) => v !== undefined && v !== ''));
  const parsed = schema.safeParse(cleaned);
  const problems: string[] = parsed.success
    ? []
    : parsed.error.issues.map((issue) => `${issue.path.join('.')}: ${issue.message}`);
  // The rules below read the parsed values; an invalid value was named above already.
  const raw: Partial<Raw> = parsed.success ? parsed.data : {};
  const production = cleaned.NODE_ENV === 'production';
  const devDefaults: string[] = [];
  const secret = (name: 'JWT_SECRET' | 'IDEMPOTENCY_HMAC_KEY' | 'RESPONSE_ENCRYPTION_KEY', dev: string) => {
    const value = raw[name] ?? cleaned[name];
    if (value) return value;
    if (production) problems.push(`${name}: required when NODE_ENV=production`);
    else devDefaults.push(name);
    return dev;
  };
  const jwt = secret('JWT_SECRET', DEV_JWT_SECRET);
  const hmac = secret('IDEMPOTENCY_HMAC_KEY', DEV_HMAC_KEY);
  const responseKey = secret('RESPONSE_ENCRYPTION_KEY', DEV_RESPONSE_KEY);
  const lease = raw.IDEMPOTENCY_LEASE_MS ?? 30000;
  const gatewayTimeout = raw.GATEWAY_TIMEOUT_MS ?? derivedGatewayTimeout(lease);
  const refused = failpointsRefused(cleaned);
  if (refused) problems.push(refused);
  else if (raw.FAILPOINTS) {
    try {
      parseFailpoints(raw.FAILPOINTS);
    } catch (err) {
      problems.push((err as Error).message);
    }
  }
  // Unset, it is derived to fit; set explicitly, it must fit too.
  if (raw.GATEWAY_TIMEOUT_MS !== undefined && 2 * gatewayTimeout > lease * GATEWAY_SHARE_OF_LEASE) {
    problems.push(
      `GATEWAY_TIMEOUT_MS: ${gatewayTimeout} ms twice (charge, then query) must fit in 3/4 of IDEMPOTENCY_LEASE_MS (${lease} ms): at most ${Math.floor((lease * GATEWAY_SHARE_OF_LEASE) / 2)}, or leave it unset to derive it`,
    );
  }
  if (problems.length > 0 || !parsed.success) {
    throw new ConfigError(`Invalid configuration: ${problems.join('; ')}`);
  }
  return {
    ...parsed.data,
    GATEWAY_TIMEOUT_MS: gatewayTimeout,
    JWT_SECRET: jwt,
    IDEMPOTENCY_HMAC_KEY: hmac,
    RESPONSE_ENCRYPTION_KEY: Buffer.from(responseKey, 'base64'),
    devDefaults,
  };
}

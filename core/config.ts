import { z } from 'zod';

// Dev-only defaults: fixed (never generated at start, which would invalidate every token on restart)
// and refused when NODE_ENV=production.
const DEV_JWT_SECRET = 'dev-only-jwt-secret-change-me-0123456789';
const DEV_HMAC_KEY = 'dev-only-idempotency-hmac-key-change-me';
const DEV_RESPONSE_KEY = Buffer.alloc(32, 7).toString('base64');

const int = (def: number, min: number, max: number) => z.coerce.number().int().min(min).max(max).default(def);

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
    .refine((v) => Buffer.from(v, 'base64').length === 32, 'must be 32 bytes, base64-encoded')
    .optional(),
  RESPONSE_ENCRYPTION_KEY_ID: z
    .string()
    .regex(/^[A-Za-z0-9_-]{1,16}$/)
    .default('k1'),
  // Keys that still decrypt older stored responses after a rotation: "id:base64,id:base64".
  RESPONSE_ENCRYPTION_PREVIOUS_KEYS: z
    .string()
    .regex(
      /^([A-Za-z0-9_-]{1,16}:[A-Za-z0-9+/=]{40,64})(,[A-Za-z0-9_-]{1,16}:[A-Za-z0-9+/=]{40,64})*$/,
      'must be id:base64 pairs',
    )
    .optional(),
  REDIS_URL: z
    .string()
    .regex(/^rediss?:\/\//, 'must be a redis:// URL')
    .optional(),
  PAYMENT_GATEWAY_URL: z.url().optional(),
  GATEWAY_TIMEOUT_MS: int(5000, 50, 600000),
  IDEMPOTENCY_WAIT_MS: int(1000, 0, 60000),
  IDEMPOTENCY_LEASE_MS: int(30000, 100, 3600000),
  IDEMPOTENCY_TTL_HOURS: z.coerce
    .number()
    .positive()
    .max(24 * 365)
    .default(24),
  PAYMENT_IDEMPOTENCY_TTL_HOURS: z.coerce
    .number()
    .positive()
    .max(24 * 365 * 10)
    .default(168),
  IDEMPOTENCY_MAX_IN_FLIGHT: int(20, 1, 100000),
  IDEMPOTENCY_MAX_RETAINED: int(10000, 1, 10000000),
  PURGE_INTERVAL_MS: int(60000, 100, 86400000),
  RECOVERER_INTERVAL_MS: int(5000, 100, 3600000),
  MAX_BODY_BYTES: int(65536, 256, 10 * 1024 * 1024),
  SHUTDOWN_TIMEOUT_MS: int(10000, 100, 600000),
  DB_POOL_MAX: int(10, 1, 200),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
});

type Raw = z.infer<typeof schema>;
export type Config = Omit<Raw, 'JWT_SECRET' | 'IDEMPOTENCY_HMAC_KEY' | 'RESPONSE_ENCRYPTION_KEY'> & {
  JWT_SECRET: string;
  IDEMPOTENCY_HMAC_KEY: string;
  RESPONSE_ENCRYPTION_KEY: Buffer;
  /** Names of secrets that fell back to their dev-only default (a warning is logged at start). */
  devDefaults: string[];
};

export class ConfigError extends Error {}

/** Parses the environment once; throws ConfigError with one line naming the variable. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const cleaned = Object.fromEntries(Object.entries(env).filter(([, v]) => v !== undefined && v !== ''));
  const parsed = schema.safeParse(cleaned);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new ConfigError(`Invalid configuration: ${issue.path.join('.')}: ${issue.message}`);
  }
  const raw = parsed.data;
  const devDefaults: string[] = [];
  const secret = (name: 'JWT_SECRET' | 'IDEMPOTENCY_HMAC_KEY' | 'RESPONSE_ENCRYPTION_KEY', dev: string) => {
    const value = raw[name];
    if (value) return value;
    if (raw.NODE_ENV === 'production') {
      throw new ConfigError(`Invalid configuration: ${name}: required when NODE_ENV=production`);
    }
    devDefaults.push(name);
    return dev;
  };
  if (raw.PAYMENT_GATEWAY_URL === undefined && raw.NODE_ENV === 'production') {
    // The bundled simulator never charges real money; running it in production is a mistake.
    throw new ConfigError('Invalid configuration: PAYMENT_GATEWAY_URL: required when NODE_ENV=production');
  }
  if (raw.GATEWAY_TIMEOUT_MS >= raw.IDEMPOTENCY_LEASE_MS) {
    // A gateway call that may outlive its lease could finish after another executor took over.
    throw new ConfigError(
      'Invalid configuration: GATEWAY_TIMEOUT_MS: must be shorter than IDEMPOTENCY_LEASE_MS',
    );
  }
  return {
    ...raw,
    JWT_SECRET: secret('JWT_SECRET', DEV_JWT_SECRET),
    IDEMPOTENCY_HMAC_KEY: secret('IDEMPOTENCY_HMAC_KEY', DEV_HMAC_KEY),
    RESPONSE_ENCRYPTION_KEY: Buffer.from(secret('RESPONSE_ENCRYPTION_KEY', DEV_RESPONSE_KEY), 'base64'),
    devDefaults,
  };
}

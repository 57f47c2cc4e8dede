import type { Logger } from 'pino';
import type { Sequelize } from 'sequelize';
import type { Config } from '../core/config.js';
import { IdempotencyEngine } from '../idempotency/engine.js';
import type { Placeholder } from '../idempotency/placeholder.js';
import { ResponseCipher } from '../idempotency/response-cipher.js';

/**
 * The idempotency engine as the configuration sets it up: the service and `npm run reconcile` (whose
 * repairs write stored answers the service must read) build it the same way.
 */
export function createEngine(
  sequelize: Sequelize,
  config: Config,
  placeholder?: Placeholder,
  logger?: Logger,
): IdempotencyEngine {
  const settings = {
    onUnreadable: (scopeKey: string, err: unknown) =>
      logger?.error({ scopeKey, err: String(err) }, 'stored idempotent answer cannot be read'),
    waitMs: config.IDEMPOTENCY_WAIT_MS,
    leaseMs: config.IDEMPOTENCY_LEASE_MS,
    maxInFlight: config.IDEMPOTENCY_MAX_IN_FLIGHT,
    maxRetained: config.IDEMPOTENCY_MAX_RETAINED,
  };
  return new IdempotencyEngine(sequelize, settings, responseCipher(config), placeholder);
}

/** The current key, and the previous keys that still decrypt older stored responses. */
function responseCipher(config: Config): ResponseCipher {
  const previous = Object.fromEntries(
    (config.RESPONSE_ENCRYPTION_PREVIOUS_KEYS ?? '')
      .split(',')
      .filter(Boolean)
      .map((pair) => [pair.split(':')[0], Buffer.from(pair.split(':')[1], 'base64')]),
  );
  return new ResponseCipher(config.RESPONSE_ENCRYPTION_KEY_ID, config.RESPONSE_ENCRYPTION_KEY, previous);
}

import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import type { Logger } from 'pino';

/**
 * Optional fast placeholder in Redis (SET NX PX): turns most concurrent duplicates away before they
 * take a database connection. An optimisation only: it can expire mid-request, be flushed, be
 * left behind by a crash or be unreachable; every such case falls through to the database, which
 * alone decides (see IdempotencyEngine.runLocal).
 */
export class Placeholder {
  private readonly redis: Redis;

  constructor(
    url: string,
    private readonly ttlMs: number,
    private readonly logger: Logger,
  ) {
    this.redis = new Redis(url, {
      // Never queue or retry commands while Redis is down: answer "unknown" at once instead.
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      connectTimeout: 1000,
      commandTimeout: 250,
      retryStrategy: (times) => Math.min(times * 200, 2000),
      lazyConnect: false,
    });
    this.redis.on('error', (err) => this.logger.debug({ err: err.message }, 'redis placeholder unavailable'));
  }

  /**
   * A token: acquired (pass it to release); false: someone holds it; undefined: Redis unavailable
   * (ignored). The token is per acquisition, not per scope key: after a flush or expiry two requests
   * of one process can hold the same scope one after the other, and a per-key memo let the first
   * one's release delete the second one's placeholder (test/unit/placeholder.test.ts).
   */
  async acquire(scopeKey: string): Promise<string | false | undefined> {
    const token = randomBytes(8).toString('hex');
    try {
      const ok = await this.redis.set(`idem:${scopeKey}`, token, 'PX', this.ttlMs, 'NX');
      return ok === 'OK' ? token : false;
    } catch {
      return undefined;
    }
  }

  async release(scopeKey: string, token: string): Promise<void> {
    try {
      // Delete only our own placeholder: after expiry someone else's may stand under this key.
      await this.redis.eval(
        "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end",
        1,
        `idem:${scopeKey}`,
        token,
      );
    } catch {
      // Expires on its own.
    }
  }

  async close(): Promise<void> {
    this.redis.disconnect();
  }
}

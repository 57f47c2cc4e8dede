import { expect } from 'chai';
import type { Redis } from 'ioredis';
import pino from 'pino';
import { Placeholder } from '../../idempotency/placeholder.js';
import { redisIfReachable } from '../support/redis.js';
import { stablePort } from '../support/stable-port.js';
import { idempotencyKey } from '../support/tokens.js';

const REDIS_URL = 'redis://127.0.0.1:6379/6';
const silent = pino({ level: 'silent' });

const reachable = () => redisIfReachable(REDIS_URL);

/** The placeholder's client connects on its own; wait until a command goes through. */
async function ready(placeholder: Placeholder): Promise<void> {
  const probe = `probe-${idempotencyKey()}`;
  for (let i = 0; i < 200; i++) {
    const held = await placeholder.acquire(probe);
    if (held) {
      await placeholder.release(probe, held);
      return;
    }
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error('placeholder never connected');
}

describe('unit: Redis placeholder (SET NX PX, released only by its holder)', () => {
  let redis: Redis | undefined;
  let placeholder: Placeholder;

  before(async function () {
    redis = await reachable();
    if (!redis) this.skip();
    placeholder = new Placeholder(REDIS_URL, 30000, silent);
    await ready(placeholder);
  });
  after(async () => {
    await placeholder?.close();
    redis?.disconnect();
  });

  it('when a scope is acquired twice, then the second is refused until the first releases', async () => {
    const scope = `t:1:orders.create:${idempotencyKey()}`;
    const first = await placeholder.acquire(scope);
    expect(first).to.be.a('string');
    expect(await placeholder.acquire(scope)).to.equal(false);
    expect(await redis?.pttl(`idem:${scope}`)).to.be.within(1, 30000);
    await placeholder.release(scope, first as string);
    expect(await redis?.exists(`idem:${scope}`)).to.equal(0);
    const again = await placeholder.acquire(scope);
    expect(again).to.be.a('string');
    await placeholder.release(scope, again as string);
  });

  it("when the placeholder vanished (flush, expiry) and another request took it, then the first holder's release leaves the new one standing", async () => {
    const scope = `t:1:orders.create:${idempotencyKey()}`;
    const first = await placeholder.acquire(scope);
    await redis?.del(`idem:${scope}`);
    const second = await placeholder.acquire(scope);
    expect(second).to.be.a('string');
    await placeholder.release(scope, first as string);
    expect(await redis?.get(`idem:${scope}`), "the first holder removed the second's placeholder").to.equal(
      second,
    );
    await placeholder.release(scope, second as string);
    expect(await redis?.exists(`idem:${scope}`)).to.equal(0);
  });
});

describe('unit: Redis placeholder with Redis down', () => {
  it('when Redis is unreachable, then acquire answers undefined at once and release does not throw', async () => {
    const placeholder = new Placeholder(`redis://127.0.0.1:${await stablePort()}/0`, 30000, silent);
    try {
      expect(await placeholder.acquire('t:1:orders.create:abcdefghijklmnop')).to.equal(undefined);
      await placeholder.release('t:1:orders.create:abcdefghijklmnop', 'token');
    } finally {
      await placeholder.close();
    }
  });
});

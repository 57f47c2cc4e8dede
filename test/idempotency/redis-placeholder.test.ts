import { expect } from 'chai';
import type { Redis } from 'ioredis';
import { userScope } from '../../idempotency/key.js';
import { http } from '../support/http.js';
import { type Instance, killAll, startInstance, startInstances } from '../support/processes.js';
import { redisIfReachable } from '../support/redis.js';
import { sharedServer } from '../support/server.js';
import { stablePort } from '../support/stable-port.js';
import { bearer, idempotencyKey, uniqueTenant } from '../support/tokens.js';
import {
  type Answer,
  expectFailure,
  holdingTransaction,
  orderScope,
  ordersOf,
  recordsOf,
  until,
} from './support.js';

const REDIS_URL = 'redis://127.0.0.1:6379/5';
const USER = '870000001';

const redisReachable = () => redisIfReachable(REDIS_URL);

/** `n` identical creates (one key, one body) spread over the instances, all sent at once. */
function race(instances: Instance[], tenant: string, key: string, merchantOrderNo: string, n: number) {
  const headers = { ...bearer(tenant, USER), 'Idempotency-Key': key };
  return Array.from({ length: n }, (_, i) =>
    http('POST', i % 2 ? '/orders' : '/api/v1/orders', {
      headers,
      body: { merchantOrderNo, amount: '4.20' },
      baseUrl: instances[i % instances.length].url,
    }),
  );
}

/**
 * Every answer of a race is the one order's 201 (exactly one executed, the rest replayed) or a 202
 * (still processing after the wait bound); a retry afterwards replays the 201.
 */
async function expectOneOrder(
  instances: Instance[],
  tenant: string,
  key: string,
  merchantOrderNo: string,
  answers: Answer[],
) {
  const statuses = answers.map((a) => a.status);
  expect(
    statuses.every((s) => s === 201 || s === 202),
    statuses.join(','),
  ).to.equal(true);
  const created = answers.filter((a) => a.status === 201);
  expect(created.length).to.be.at.least(1);
  const orders = await ordersOf(tenant);
  expect(orders.filter((o) => o.merchant_order_no === merchantOrderNo)).to.have.length(1);
  const id = orders.find((o) => o.merchant_order_no === merchantOrderNo)?.id;
  for (const a of created) expect(a.body.data.id).to.equal(id);
  expect(created.filter((a) => a.headers.get('idempotent-replayed') === null)).to.have.length.at.most(1);
  const retry = await http('POST', '/api/v1/orders', {
    headers: { ...bearer(tenant, USER), 'Idempotency-Key': key },
    body: { merchantOrderNo, amount: 4.2 },
    baseUrl: instances[0].url,
  });
  expect(retry.status).to.equal(201);
  expect(retry.body.data.id).to.equal(id);
  expect(retry.headers.get('idempotent-replayed')).to.equal('true');
}

describe('Redis placeholder (2 instances, REDIS_URL set): an optimisation only', function () {
  this.timeout(90000);
  let redis: Redis | undefined;
  let instances: Instance[] = [];

  before(async function () {
    redis = await redisReachable();
    if (!redis) this.skip();
    await sharedServer();
    instances = await startInstances(2, { REDIS_URL });
  });
  after(async () => {
    await killAll();
    redis?.disconnect();
  });

  it('when a request is in flight, then its placeholder stands in Redis, and it is released once answered', async () => {
    const tenant = uniqueTenant();
    const key = idempotencyKey();
    const scope = orderScope(tenant, USER, key);
    const answer = await holdingTransaction(async (client) => {
      // Hold the record so the request stays in flight (it answers 202 after the wait bound).
      await client.query(
        `INSERT INTO idempotency_records (scope_key, request_hash, status, user_scope, operation, expires_at)
         VALUES ($1, $2, 'PROCESSING', $3, 'orders.create', now() + interval '1 hour')`,
        [scope, '0'.repeat(64), userScope(tenant, USER)],
      );
      const pending = race(instances, tenant, key, 'mo-ph', 1)[0];
      await until(async () => (await redis?.exists(`idem:${scope}`)) === 1, 'placeholder set in Redis');
      return pending;
    });
    expect(answer.status).to.equal(202);
    expect(await redis?.exists(`idem:${scope}`)).to.equal(0);
    expect(await ordersOf(tenant)).to.deep.equal([]);
  });

  it('when 40 identical creates race over 2 instances, then one order and no placeholder is left behind', async () => {
    const tenant = uniqueTenant();
    const key = idempotencyKey();
    const answers = await Promise.all(race(instances, tenant, key, 'mo-race', 40));
    await expectOneOrder(instances, tenant, key, 'mo-race', answers);
    expect(await redis?.keys(`idem:${userScope(tenant, USER)}:*`)).to.deep.equal([]);
    expect((await recordsOf(tenant)).map((r) => r.status)).to.deep.equal(['SUCCEEDED']);
  });

  it('when Redis is flushed again and again while races run, then still one order per key and correct answers', async () => {
    const tenant = uniqueTenant();
    const [k1, k2] = [idempotencyKey(), idempotencyKey()];
    let racing = true;
    const flusher = (async () => {
      let flushes = 0;
      while (racing || flushes === 0) {
        await redis?.flushdb();
        flushes += 1;
      }
      return flushes;
    })();
    const first = await Promise.all(race(instances, tenant, k1, 'mo-f1', 40));
    // Same key again (all replays) and a new key, still under flushing.
    const [again, second] = await Promise.all([
      Promise.all(race(instances, tenant, k1, 'mo-f1', 40)),
      Promise.all(race(instances, tenant, k2, 'mo-f2', 40)),
    ]);
    racing = false;
    expect(await flusher).to.be.at.least(1);

    await expectOneOrder(instances, tenant, k1, 'mo-f1', first);
    for (const a of again) {
      expect(a.status).to.equal(201);
      expect(a.headers.get('idempotent-replayed')).to.equal('true');
      expect(a.body.data.merchantOrderNo).to.equal('mo-f1');
    }
    await expectOneOrder(instances, tenant, k2, 'mo-f2', second);
    expect(await ordersOf(tenant)).to.have.length(2);
  });

  it('when a stale placeholder is left in Redis (a crashed holder), then the request still executes once and the stale entry is not removed by others', async () => {
    const tenant = uniqueTenant();
    const key = idempotencyKey();
    const scope = orderScope(tenant, USER, key);
    await redis?.set(`idem:${scope}`, 'stale-holder', 'PX', 30000);
    const answers = await Promise.all(race(instances, tenant, key, 'mo-stale', 10));
    await expectOneOrder(instances, tenant, key, 'mo-stale', answers);
    expect(await redis?.get(`idem:${scope}`)).to.equal('stale-holder');
    await redis?.del(`idem:${scope}`);
  });
});

describe('Redis placeholder with Redis down (REDIS_URL points at a closed port)', function () {
  this.timeout(90000);
  let instance: Instance;

  before(async () => {
    await sharedServer();
    instance = await startInstance({ REDIS_URL: `redis://127.0.0.1:${await stablePort()}/0` });
  });
  after(killAll);

  it('when Redis is unreachable, then creates, races, replays and mismatches are answered as without Redis', async () => {
    const tenant = uniqueTenant();
    const key = idempotencyKey();
    const answers = await Promise.all(race([instance], tenant, key, 'mo-down', 20));
    await expectOneOrder([instance], tenant, key, 'mo-down', answers);

    const mismatch = await http('POST', '/api/v1/orders', {
      headers: { ...bearer(tenant, USER), 'Idempotency-Key': key },
      body: { merchantOrderNo: 'mo-down', amount: 5 },
      baseUrl: instance.url,
    });
    expectFailure(mismatch, 409, 40901);
    const fresh = await http('POST', '/api/v1/orders', {
      headers: { ...bearer(tenant, USER), 'Idempotency-Key': idempotencyKey() },
      body: { merchantOrderNo: 'mo-down-2', amount: 5 },
      baseUrl: instance.url,
    });
    expect(fresh.status).to.equal(201);
    expect((await ordersOf(tenant)).map((o) => o.merchant_order_no)).to.deep.equal(['mo-down', 'mo-down-2']);
  });
});

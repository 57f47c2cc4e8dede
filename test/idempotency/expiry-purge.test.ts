import { expect } from 'chai';
import { pauseAfterBatch } from '../../core/pacing.js';
import { scopeKey, userScope } from '../../idempotency/key.js';
import { purgeExpired } from '../../idempotency/purge-expired.js';
import { sharedServer } from '../support/server.js';
import { bearer, idempotencyKey, uniqueTenant } from '../support/tokens.js';
import { createOrderVia, expectFailure, orderScope, ordersOf, recordsOf, sql } from './support.js';

const USER = '840000001';

async function expire(scopeKeys: string[]): Promise<void> {
  await sql(
    `UPDATE idempotency_records SET expires_at = now() - interval '1 minute' WHERE scope_key = ANY($1)`,
    [scopeKeys],
  );
}

async function purge(): Promise<number> {
  return purgeExpired((await sharedServer()).services.sequelize);
}

describe('idempotency record expiry and purge', () => {
  it('when finished records have expired, then purgeExpired deletes them leaving tombstones, keeps PROCESSING and unexpired ones; the old key gets 40905 and a new key meets the business rule', async () => {
    const tenant = uniqueTenant();
    const auth = bearer(tenant, USER);
    const body = { merchantOrderNo: 'mo-purge', amount: 9 };
    const [k1, k2, k3] = [idempotencyKey(), idempotencyKey(), idempotencyKey()];
    const created = await createOrderVia({
      transport: 'rest',
      headers: { ...auth, 'Idempotency-Key': k1 },
      body,
    });
    expect(created.status).to.equal(201);
    // A FAILED_FINAL record (the clash) and an unexpired SUCCEEDED one of another order.
    expectFailure(
      await createOrderVia({ transport: 'rest', headers: { ...auth, 'Idempotency-Key': k2 }, body }),
      409,
      40904,
    );
    const kept = await createOrderVia({
      transport: 'rest',
      headers: { ...auth, 'Idempotency-Key': k3 },
      body: { merchantOrderNo: 'mo-kept', amount: 1 },
    });
    expect(kept.status).to.equal(201);
    // An expired PROCESSING record (a live lease of another operation): never purged.
    const lease = scopeKey(tenant, USER, 'payments.create', idempotencyKey());
    await sql(
      `INSERT INTO idempotency_records (scope_key, request_hash, status, user_scope, operation, owner_token, lease_until, expires_at)
       VALUES ($1, $2, 'PROCESSING', $3, 'payments.create', $4, now() + interval '1 hour', now() - interval '1 minute')`,
      [lease, '0'.repeat(64), userScope(tenant, USER), 'f'.repeat(64)],
    );
    try {
      await expire([orderScope(tenant, USER, k1), orderScope(tenant, USER, k2)]);

      expect(await purge()).to.be.at.least(2);

      const left = await recordsOf(tenant);
      expect(left.map((r) => [r.scope_key, r.status]).sort()).to.deep.equal(
        [
          [orderScope(tenant, USER, k3), 'SUCCEEDED'],
          [lease, 'PROCESSING'],
        ].sort(),
      );

      // The record is gone, its tombstone is not: the old key is refused (40905) whatever the body,
      // and nothing is written; the order stays, and so does its business rule for a new key.
      for (const b of [body, { merchantOrderNo: 'mo-other', amount: 1 }]) {
        const again = await createOrderVia({
          transport: 'trpc',
          headers: { ...auth, 'Idempotency-Key': k1 },
          body: b,
        });
        expectFailure(again, 409, 40905);
        expect(again.headers.get('idempotent-replayed')).to.equal(null);
      }
      expect((await ordersOf(tenant)).map((o) => o.merchant_order_no)).to.deep.equal(['mo-purge', 'mo-kept']);
      expect((await recordsOf(tenant)).length).to.equal(2);
      const fresh = await createOrderVia({
        transport: 'rest',
        headers: { ...auth, 'Idempotency-Key': idempotencyKey() },
        body,
      });
      expectFailure(fresh, 409, 40904);
    } finally {
      await sql('DELETE FROM idempotency_records WHERE scope_key = $1', [lease]);
    }
  });

  it('when a record has expired but is not purged yet, then its key is dead: 40905 whatever the body, nothing written', async () => {
    const tenant = uniqueTenant();
    const headers = { ...bearer(tenant, USER), 'Idempotency-Key': idempotencyKey() };
    const first = await createOrderVia({
      transport: 'rest',
      headers,
      body: { merchantOrderNo: 'mo-e', amount: 2 },
    });
    expect(first.status).to.equal(201);
    await expire([orderScope(tenant, USER, headers['Idempotency-Key'])]);

    for (const transport of ['rest', 'trpc'] as const) {
      for (const body of [
        { merchantOrderNo: 'mo-e', amount: 2 },
        { merchantOrderNo: 'mo-e2', amount: 3 },
      ]) {
        const again = await createOrderVia({ transport, headers, body });
        expectFailure(again, 409, 40905);
        expect(again.headers.get('idempotent-replayed')).to.equal(null);
      }
    }
    expect((await ordersOf(tenant)).map((o) => o.merchant_order_no)).to.deep.equal(['mo-e']);
    const records = await recordsOf(tenant);
    expect(records.map((r) => [r.status, r.resource_id])).to.deep.equal([['SUCCEEDED', first.body.data.id]]);
  });

  it('when more expired records exist than one batch holds, then purgeExpired goes on batch by batch until none is left', async () => {
    const tenant = uniqueTenant();
    const auth = bearer(tenant, USER);
    const keys: string[] = [];
    for (const i of [1, 2, 3, 4, 5]) {
      const key = idempotencyKey();
      const a = await createOrderVia({
        transport: 'rest',
        headers: { ...auth, 'Idempotency-Key': key },
        body: { merchantOrderNo: `mo-${i}`, amount: i },
      });
      expect(a.status).to.equal(201);
      keys.push(orderScope(tenant, USER, key));
    }
    await expire(keys);
    const purged = await purgeExpired((await sharedServer()).services.sequelize, {
      batchSize: 2,
      maxBatches: 1000,
    });
    expect(purged).to.be.at.least(5);
    expect(await recordsOf(tenant)).to.deep.equal([]);
    expect(await ordersOf(tenant)).to.have.length(5);
  });
});

describe('purge pacing', () => {
  it('pauses after a batch three times as long as the batch took at 25%, not at all at 100%, and refuses a share outside (0, 100]', () => {
    expect(pauseAfterBatch(4, 25)).to.equal(12);
    expect(pauseAfterBatch(4, 50)).to.equal(4);
    expect(pauseAfterBatch(4, 100)).to.equal(0);
    expect(() => pauseAfterBatch(4, 0)).to.throw(RangeError);
    expect(() => pauseAfterBatch(4, 101)).to.throw(RangeError);
  });

  async function expiredRecords(n: number): Promise<string> {
    const tenant = uniqueTenant();
    const auth = bearer(tenant, USER);
    const keys: string[] = [];
    for (let i = 1; i <= n; i++) {
      const key = idempotencyKey();
      const a = await createOrderVia({
        transport: 'rest',
        headers: { ...auth, 'Idempotency-Key': key },
        body: { merchantOrderNo: `mo-paced-${i}`, amount: i },
      });
      expect(a.status).to.equal(201);
      keys.push(orderScope(tenant, USER, key));
    }
    await expire(keys);
    return tenant;
  }

  it('when paced, then it waits after each full batch (never after the last, short one), tells the count of each batch, and still purges the whole backlog', async () => {
    const tenant = await expiredRecords(5);
    const pauses: number[] = [];
    const batches: number[] = [];
    const purged = await purgeExpired((await sharedServer()).services.sequelize, {
      batchSize: 2,
      maxBatches: Number.POSITIVE_INFINITY,
      busyPercent: 25,
      wait: async (ms) => {
        pauses.push(ms);
      },
      onBatch: (deleted) => batches.push(deleted),
    });
    // Each batch's count is told as it commits (the service's metrics), and they add up.
    expect(batches.reduce((a, b) => a + b, 0)).to.equal(purged);
    expect(purged).to.be.at.least(5);
    expect(await recordsOf(tenant)).to.deep.equal([]);
    // Batches of 2: at least two full ones (each followed by a pause), then a short one (none).
    // One pause per full batch: a batch of 2 is followed by one, so floor(purged / 2) in all (an even
    // total ends with an empty batch, which is not followed by a pause).
    expect(pauses.length).to.equal(Math.floor(purged / 2));
    for (const ms of pauses) expect(ms).to.be.greaterThan(0);
  });

  it('when the signal aborts during a pause (shutdown), then the purge ends before its next batch', async () => {
    const tenant = await expiredRecords(5);
    const stop = new AbortController();
    let pauses = 0;
    const purged = await purgeExpired((await sharedServer()).services.sequelize, {
      batchSize: 2,
      maxBatches: Number.POSITIVE_INFINITY,
      busyPercent: 25,
      signal: stop.signal,
      wait: async () => {
        pauses++;
        stop.abort();
      },
    });
    expect(pauses).to.equal(1);
    expect(purged).to.equal(2);
    // At least 3 of the 5 are still there (the first batch may have taken other tests' leftovers).
    expect((await recordsOf(tenant)).length).to.be.at.least(3);
  });
});

import { expect } from 'chai';
import type pg from 'pg';
import { userScope } from '../../idempotency/key.js';
import { bearer, idempotencyKey, uniqueTenant } from '../support/tokens.js';
import {
  blockedBy,
  createdStatus,
  createOrderVia,
  expectFailure,
  holdingTransaction,
  orderScope,
  ordersOf,
  recordsOf,
  TRANSPORTS,
  until,
} from './support.js';

const USER = '820000001';

/** An uncommitted PROCESSING record under the exact scope key the engine will use. */
async function lockRecord(client: pg.Client, tenant: string, key: string): Promise<void> {
  await client.query(
    `INSERT INTO idempotency_records (scope_key, request_hash, status, user_scope, operation, expires_at)
     VALUES ($1, $2, 'PROCESSING', $3, 'orders.create', now() + interval '1 hour')`,
    [orderScope(tenant, USER, key), '0'.repeat(64), userScope(tenant, USER)],
  );
}

/** An uncommitted order with the same merchantOrderNo: the service's insert waits on its unique index. */
async function lockMerchantOrderNo(
  client: pg.Client,
  tenant: string,
  merchantOrderNo: string,
): Promise<void> {
  await client.query(
    `INSERT INTO orders (tenant_id, user_id, merchant_order_no, amount, currency) VALUES ($1, 1, $2, 1, 'USD')`,
    [tenant, merchantOrderNo],
  );
}

for (const transport of TRANSPORTS) {
  describe(`in-flight duplicates of orders.create over ${transport}`, () => {
    it('when the record is held by an unfinished transaction past IDEMPOTENCY_WAIT_MS, then 202 PROCESSING with Retry-After; after it rolls back the retry executes', async () => {
      const tenant = uniqueTenant();
      const key = idempotencyKey();
      const headers = { ...bearer(tenant, USER), 'Idempotency-Key': key };
      const body = { merchantOrderNo: 'mo-held', amount: 2 };

      await holdingTransaction(async (client) => {
        await lockRecord(client, tenant, key);
        const waiting = await createOrderVia({ transport, headers, body });
        // REST: 202 with the processing envelope; tRPC: a successful result whose payload says PROCESSING.
        expect(waiting.status).to.equal(transport === 'rest' ? 202 : 200);
        expect(waiting.body.code).to.equal(202);
        expect(waiting.body.message).to.be.a('string').and.not.equal('');
        expect(waiting.body.data).to.deep.equal({ status: 'PROCESSING', resourceId: null });
        expect(waiting.headers.get('retry-after')).to.match(/^[1-9][0-9]*$/);
        expect(waiting.headers.get('location')).to.equal(null);
        expect(waiting.headers.get('idempotent-replayed')).to.equal(null);
        expect(await ordersOf(tenant)).to.deep.equal([]);
      });

      const retry = await createOrderVia({ transport, headers, body });
      expect(retry.status).to.equal(createdStatus(transport));
      expect(retry.headers.get('idempotent-replayed')).to.equal(null);
      expect((await ordersOf(tenant)).map((o) => o.id)).to.deep.equal([retry.body.data.id]);
      expect((await recordsOf(tenant)).map((r) => r.status)).to.deep.equal(['SUCCEEDED']);
    });
  });
}

describe('in-flight duplicates: waiting for the first request', () => {
  it('when a duplicate arrives while the first is still executing and the first then finishes, then the duplicate waits and replays it', async () => {
    const tenant = uniqueTenant();
    const headers = { ...bearer(tenant, USER), 'Idempotency-Key': idempotencyKey() };
    const body = { merchantOrderNo: 'mo-wait', amount: 4 };

    const [first, second] = await holdingTransaction(async (client, holder) => {
      // The first request claims its record, then waits on our uncommitted order's unique entry.
      await lockMerchantOrderNo(client, tenant, body.merchantOrderNo);
      const firstP = createOrderVia({ transport: 'rest', headers, body });
      await until(async () => (await blockedBy(holder)).length === 1, 'first request waiting on our order');
      const [firstPid] = await blockedBy(holder);
      // The duplicate (other transport) waits on the first request's uncommitted record.
      const secondP = createOrderVia({ transport: 'trpc', headers, body });
      await until(async () => (await blockedBy(firstPid)).length === 1, 'duplicate waiting on the first');
      await client.query('ROLLBACK');
      return Promise.all([firstP, secondP]);
    });

    expect(first.status).to.equal(201);
    expect(first.headers.get('idempotent-replayed')).to.equal(null);
    expect(second.status).to.equal(200);
    expect(second.body).to.deep.equal(first.body);
    expect(second.headers.get('idempotent-replayed')).to.equal('true');
    expect(second.headers.get('location')).to.equal(first.headers.get('location'));
    const orders = await ordersOf(tenant);
    expect(orders.map((o) => [o.id, o.user_id])).to.deep.equal([[first.body.data.id, USER]]);
  });

  it('when the first execution fails transiently (its business write times out), then no record is left and a retry with the same key executes', async () => {
    const tenant = uniqueTenant();
    const headers = { ...bearer(tenant, USER), 'Idempotency-Key': idempotencyKey() };
    const body = { merchantOrderNo: 'mo-transient', amount: 6 };

    await holdingTransaction(async (client) => {
      await lockMerchantOrderNo(client, tenant, body.merchantOrderNo);
      const failed = await createOrderVia({ transport: 'rest', headers, body });
      // The database could not serve the write in time: retryable, 503 with Retry-After.
      expectFailure(failed, 503);
      expect(failed.headers.get('retry-after')).to.match(/^[1-9][0-9]*$/);
      expect(failed.headers.get('idempotent-replayed')).to.equal(null);
      expect(await recordsOf(tenant), 'the PROCESSING record was rolled back').to.deep.equal([]);
    });

    const retry = await createOrderVia({ transport: 'trpc', headers, body });
    expect(retry.status).to.equal(200);
    expect(retry.headers.get('idempotent-replayed')).to.equal(null);
    expect((await ordersOf(tenant)).map((o) => [o.id, o.user_id])).to.deep.equal([
      [retry.body.data.id, USER],
    ]);
    expect((await recordsOf(tenant)).map((r) => r.status)).to.deep.equal(['SUCCEEDED']);
  });
});

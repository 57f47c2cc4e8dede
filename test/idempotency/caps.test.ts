import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import { scopeKey, userScope } from '../../idempotency/key.js';
import { type Instance, killAll, startInstance } from '../support/processes.js';
import { sharedServer } from '../support/server.js';
import { bearer, idempotencyKey, uniqueTenant } from '../support/tokens.js';
import {
  type Answer,
  createOrderVia,
  expectFailure,
  ordersOf,
  recordsOf,
  sql,
  type Transport,
} from './support.js';

const USER = '830000001';

/**
 * Committed PROCESSING records of another operation for the user, each holding an in-flight slot
 * (what live payment leases look like: Mode A's own PROCESSING rows are never committed). Lease in
 * the future, so no recoverer takes them over; removed by the test afterwards (the purge never
 * touches PROCESSING rows).
 */
async function insertLeases(tenant: string, n: number): Promise<string[]> {
  const keys: string[] = [];
  for (let i = 0; i < n; i++) {
    const key = scopeKey(tenant, USER, 'payments.create', idempotencyKey());
    await sql(
      `INSERT INTO idempotency_records
         (scope_key, request_hash, status, user_scope, operation, owner_token, lease_until, expires_at)
       VALUES ($1, $2, 'PROCESSING', $3, 'payments.create', $4, now() + interval '1 hour', now() + interval '1 day')`,
      [key, '0'.repeat(64), userScope(tenant, USER), randomBytes(32).toString('hex')],
    );
    await sql(
      `INSERT INTO idempotency_slots (user_scope, slot, holder) VALUES ($1, $2, $3)
       ON CONFLICT (user_scope, slot) DO UPDATE SET holder = EXCLUDED.holder`,
      [userScope(tenant, USER), i + 1, key],
    );
    keys.push(key);
  }
  return keys;
}

/** The leases end (as Tx 2 would end them: the record leaves PROCESSING and gives its slot back). */
async function deleteRecords(scopeKeys: string[]): Promise<void> {
  await sql('UPDATE idempotency_slots SET holder = NULL WHERE holder = ANY($1)', [scopeKeys]);
  await sql('DELETE FROM idempotency_records WHERE scope_key = ANY($1)', [scopeKeys]);
}

function expect429(a: Answer, code: 42901 | 42902): void {
  expectFailure(a, 429, code);
  expect(a.headers.get('retry-after')).to.match(/^[1-9][0-9]*$/);
  expect(a.headers.get('idempotent-replayed')).to.equal(null);
}

describe('idempotency caps per user (instance: MAX_RETAINED=3, MAX_IN_FLIGHT=2, WAIT_MS=300)', function () {
  this.timeout(90000);
  let instance: Instance;

  before(async () => {
    await sharedServer(); // migrations applied before the process starts
    instance = await startInstance({
      IDEMPOTENCY_MAX_RETAINED: '3',
      IDEMPOTENCY_MAX_IN_FLIGHT: '2',
      IDEMPOTENCY_WAIT_MS: '300',
    });
  });
  after(killAll);

  const order = (transport: Transport, tenant: string, key: string, merchantOrderNo: string, user = USER) =>
    createOrderVia({
      transport,
      baseUrl: instance.url,
      headers: { ...bearer(tenant, user), 'Idempotency-Key': key },
      body: { merchantOrderNo, amount: 1 },
    });

  it('when a user holds 3 unexpired records, then a 4th key gets 429/42902 on both transports, while replays and other users still work', async () => {
    const tenant = uniqueTenant();
    const keys = [idempotencyKey(), idempotencyKey(), idempotencyKey()];
    const firsts: Answer[] = [];
    for (const [i, key] of keys.entries()) firsts.push(await order('rest', tenant, key, `mo-${i}`));
    expect(firsts.map((a) => a.status)).to.deep.equal([201, 201, 201]);

    expect429(await order('rest', tenant, idempotencyKey(), 'mo-4'), 42902);
    expect429(await order('trpc', tenant, idempotencyKey(), 'mo-5'), 42902);

    // The cap refuses new keys only: a retry of a stored one is still answered.
    const replayRest = await order('rest', tenant, keys[0], 'mo-0');
    expect(replayRest.status).to.equal(201);
    expect(replayRest.body).to.deep.equal(firsts[0].body);
    expect(replayRest.headers.get('idempotent-replayed')).to.equal('true');
    const replayTrpc = await order('trpc', tenant, keys[1], 'mo-1');
    expect(replayTrpc.status).to.equal(200);
    expect(replayTrpc.body).to.deep.equal(firsts[1].body);
    expect(replayTrpc.headers.get('idempotent-replayed')).to.equal('true');
    // A same-key request with another body is still compared, not refused by the cap.
    expectFailure(await order('rest', tenant, keys[2], 'mo-other'), 409, 40901);

    // The cap is per user: another user of the tenant is not limited.
    expect((await order('rest', tenant, idempotencyKey(), 'mo-u2', '830000002')).status).to.equal(201);

    expect((await ordersOf(tenant)).map((o) => o.merchant_order_no)).to.deep.equal([
      'mo-0',
      'mo-1',
      'mo-2',
      'mo-u2',
    ]);
    expect(await recordsOf(tenant)).to.have.length(4);
  });

  it('when one of the 3 records has expired, then it no longer counts and a new key executes', async () => {
    const tenant = uniqueTenant();
    for (const i of [0, 1, 2])
      expect((await order('rest', tenant, idempotencyKey(), `mo-${i}`)).status).to.equal(201);
    expect429(await order('rest', tenant, idempotencyKey(), 'mo-3'), 42902);
    await sql(
      `UPDATE idempotency_records SET expires_at = now() - interval '1 minute'
       WHERE scope_key = (SELECT scope_key FROM idempotency_records WHERE split_part(user_scope, ':', 1) = $1 LIMIT 1)`,
      [tenant],
    );
    const next = await order('rest', tenant, idempotencyKey(), 'mo-3');
    expect(next.status).to.equal(201);
    expect(await ordersOf(tenant)).to.have.length(4);
  });

  it('when a user has 2 PROCESSING records, then a new key gets 429/42901 on both transports, a replay is still answered, and one fewer lets it through', async () => {
    const tenant = uniqueTenant();
    const stored = idempotencyKey();
    const first = await order('rest', tenant, stored, 'mo-a');
    expect(first.status).to.equal(201);
    const leases = await insertLeases(tenant, 2);
    try {
      expect429(await order('rest', tenant, idempotencyKey(), 'mo-b'), 42901);
      expect429(await order('trpc', tenant, idempotencyKey(), 'mo-c'), 42901);
      expect((await ordersOf(tenant)).map((o) => o.merchant_order_no)).to.deep.equal(['mo-a']);

      const replay = await order('trpc', tenant, stored, 'mo-a');
      expect(replay.status).to.equal(200);
      expect(replay.body).to.deep.equal(first.body);
      expect(replay.headers.get('idempotent-replayed')).to.equal('true');

      await deleteRecords(leases.slice(0, 1));
      const through = await order('rest', tenant, idempotencyKey(), 'mo-d');
      expect(through.status).to.equal(201);
      expect((await ordersOf(tenant)).map((o) => o.merchant_order_no)).to.deep.equal(['mo-a', 'mo-d']);
      const statuses = (await recordsOf(tenant)).map((r) => r.status).sort();
      expect(statuses).to.deep.equal(['PROCESSING', 'SUCCEEDED', 'SUCCEEDED']);
    } finally {
      await deleteRecords(leases);
    }
  });
});

// A purged key is never executed again (issue 26, CONTRACT section 5, 40905). Each test fails on the
// code before tombstones: the purge left nothing behind and the same key executed afresh.
import { expect } from 'chai';
import { deleteRecordsStatement } from '../../idempotency/caps.js';
import { scopeKey } from '../../idempotency/key.js';
import { purgeExpired } from '../../idempotency/purge-expired.js';
import { http } from '../support/http.js';
import { sharedServer } from '../support/server.js';
import { bearer, idempotencyKey, uniqueTenant } from '../support/tokens.js';
import { adminOf, createUser, OPERATOR_ID, userRow } from '../support/users.js';
import {
  blockedBy,
  createOrderVia,
  expectFailure,
  holdingTransaction,
  orderScope,
  recordsOf,
  sql,
  until,
} from './support.js';

const USER = '850000001';

const expireTenant = (tenant: string) =>
  sql(
    `UPDATE idempotency_records SET expires_at = now() - interval '1 minute' WHERE split_part(user_scope, ':', 1) = $1`,
    [tenant],
  );

const purge = async () => purgeExpired((await sharedServer()).services.sequelize);

const tombstoneOf = async (scope: string) =>
  (
    await sql<{ request_digest: Buffer; left_days: number }>(
      `SELECT request_digest, EXTRACT(EPOCH FROM expires_at - now()) / 86400 AS left_days
       FROM idempotency_tombstones WHERE scope_digest = sha256(convert_to($1, 'UTF8'))`,
      [scope],
    )
  )[0];

const countOf = async (table: 'users' | 'orders', tenant: string) =>
  Number(
    (await sql<{ n: string }>(`SELECT count(*) AS n FROM ${table} WHERE tenant_id = $1`, [tenant]))[0].n,
  );

describe('tombstones: a purged key is refused 409 40905 and executes nothing', () => {
  it('when the purge deletes a record, then it leaves a tombstone of its scope (32-byte digests, kept 30 days) in the same statement', async () => {
    const tenant = uniqueTenant();
    const key = idempotencyKey();
    const created = await createOrderVia({
      transport: 'rest',
      headers: { ...bearer(tenant, USER), 'Idempotency-Key': key },
      body: { merchantOrderNo: 'mo-t', amount: 1 },
    });
    expect(created.status).to.equal(201);
    const scope = orderScope(tenant, USER, key);
    expect(await tombstoneOf(scope)).to.equal(undefined);
    await expireTenant(tenant);
    await purge();
    expect(await recordsOf(tenant)).to.deep.equal([]);
    const tomb = await tombstoneOf(scope);
    expect(tomb.request_digest).to.have.length(32);
    expect(Number(tomb.left_days)).to.be.within(29.9, 30);
  });

  it('when a tombstone has expired, then the purge deletes it, and only it', async () => {
    const [old, live] = [`${uniqueTenant()}:old`, `${uniqueTenant()}:live`];
    await sql(
      `INSERT INTO idempotency_tombstones (scope_digest, request_digest, expires_at)
       VALUES (sha256(convert_to($1, 'UTF8')), sha256('x'), now() - interval '1 minute'),
              (sha256(convert_to($2, 'UTF8')), sha256('x'), now() + interval '1 day')`,
      [old, live],
    );
    await purge();
    expect(await tombstoneOf(old)).to.equal(undefined);
    expect(await tombstoneOf(live)).to.not.equal(undefined);
  });

  it("when a claim holds the key's advisory lock, then the purge skips that record (no tombstone) and takes it on a later run", async () => {
    const tenant = uniqueTenant();
    const key = idempotencyKey();
    const created = await createOrderVia({
      transport: 'rest',
      headers: { ...bearer(tenant, USER), 'Idempotency-Key': key },
      body: { merchantOrderNo: 'mo-lock', amount: 1 },
    });
    expect(created.status).to.equal(201);
    const scope = orderScope(tenant, USER, key);
    await holdingTransaction(async (client) => {
      await client.query('SELECT pg_advisory_xact_lock(7648, hashtext($1))', [scope]);
      // Expired once the lock is held: no purge, the test's or the service's, can take it before.
      await expireTenant(tenant);
      await purge();
      expect((await recordsOf(tenant)).map((r) => r.scope_key)).to.deep.equal([scope]);
      expect(await tombstoneOf(scope)).to.equal(undefined);
    });
    await purge();
    expect(await recordsOf(tenant)).to.deep.equal([]);
    expect(await tombstoneOf(scope)).to.not.equal(undefined);
  });

  it('when a claim arrives while a purge of its key is uncommitted, then it waits for the key lock and, after the commit, sees the tombstone: nothing claimed', async () => {
    const tenant = uniqueTenant();
    const key = idempotencyKey();
    const created = await createOrderVia({
      transport: 'rest',
      headers: { ...bearer(tenant, USER), 'Idempotency-Key': key },
      body: { merchantOrderNo: 'mo-race', amount: 1 },
    });
    expect(created.status).to.equal(201);
    const scope = orderScope(tenant, USER, key);
    const claimSql = `SELECT * FROM idem_claim($1, 'h', $2, 'orders.create', 3600, 20, 10000, NULL, NULL, NULL)`;
    const claimer = await holdingTransaction(async (claimant, claimantPid) =>
      holdingTransaction(async (purger, purgerPid) => {
        // The record expires inside the purger's own transaction: committed beforehand, the service's
        // background purge (any instance's, every PURGE_INTERVAL_MS) could take it first, and the
        // claim would then wait on nothing (a CI run failed so).
        await purger.query(
          `UPDATE idempotency_records SET expires_at = now() - interval '1 minute' WHERE scope_key = $1`,
          [scope],
        );
        const where = `r.scope_key = ${`'${scope.replaceAll("'", "''")}'`} AND r.expires_at < now()`;
        await purger.query(deleteRecordsStatement(where, 10, 30));
        const claim = claimant.query(claimSql, [scope, `${tenant}:${USER}`]).then(
          (r) => ({ claimed: r.rows[0]?.claimed ?? null, error: null as null | { hint?: string } }),
          (error: { hint?: string }) => ({ claimed: null, error }),
        );
        const waitsOnPurge = async () => (await blockedBy(purgerPid)).includes(claimantPid);
        await until(waitsOnPurge, 'the claim waits on the purge');
        await purger.query('COMMIT');
        return claim;
      }),
    );
    expect(claimer.claimed).to.equal(null);
    expect(claimer.error?.hint).to.equal('idem_claim: key expired');
    expect(await recordsOf(tenant)).to.deep.equal([]);
  });

  it('when a keyed user create was purged, then the same key gets 40905 whatever the body and creates no user; a new key creates one', async () => {
    const tenant = uniqueTenant();
    const headers = { ...adminOf(tenant), 'Idempotency-Key': idempotencyKey() };
    const first = await http('POST', '/api/v1/users', { headers, body: { name: 'Tomb', age: 30 } });
    expect(first.status, first.text).to.equal(201);
    await expireTenant(tenant);
    await purge();
    for (const body of [
      { name: 'Tomb', age: 30 },
      { name: 'Other', age: 31 },
    ]) {
      expectFailure(await http('POST', '/api/v1/users', { headers, body }), 409, 40905);
    }
    expect(await countOf('users', tenant)).to.equal(1);
    expect(await recordsOf(tenant)).to.deep.equal([]);
    const fresh = await http('POST', '/api/v1/users', {
      headers: { ...adminOf(tenant), 'Idempotency-Key': idempotencyKey() },
      body: { name: 'Tomb', age: 30 },
    });
    expect(fresh.status, fresh.text).to.equal(201);
    expect(await countOf('users', tenant)).to.equal(2);
  });

  it('when a key this process never saw has a tombstone (purged by another instance), then the one-statement create (idem_execute) answers 40905 and writes nothing', async () => {
    const tenant = uniqueTenant();
    const [userKey, orderKey] = [idempotencyKey(), idempotencyKey()];
    await sql(
      `INSERT INTO idempotency_tombstones (scope_digest, request_digest, expires_at)
       SELECT sha256(convert_to(s, 'UTF8')), sha256('x'), now() + interval '1 day' FROM unnest($1::text[]) s`,
      [[scopeKey(tenant, OPERATOR_ID, 'users.create', userKey), orderScope(tenant, USER, orderKey)]],
    );
    const user = await http('POST', '/api/v1/users', {
      headers: { ...adminOf(tenant), 'Idempotency-Key': userKey },
      body: { name: 'Never', age: 30 },
    });
    expectFailure(user, 409, 40905);
    const order = await createOrderVia({
      transport: 'rest',
      headers: { ...bearer(tenant, USER), 'Idempotency-Key': orderKey },
      body: { merchantOrderNo: 'mo-never', amount: 1 },
    });
    expectFailure(order, 409, 40905);
    expect(await countOf('users', tenant)).to.equal(0);
    expect(await countOf('orders', tenant)).to.equal(0);
    expect(await recordsOf(tenant)).to.deep.equal([]);
  });

  it('when a keyed PATCH was purged, then the same key gets 40905 and changes nothing; a new key applies', async () => {
    const tenant = uniqueTenant();
    const user = await createUser(tenant, { name: 'Patchy' });
    const key = idempotencyKey();
    const headers = { ...bearer(tenant, user.id), 'Idempotency-Key': key };
    const first = await http('PATCH', `/api/v1/users/${user.id}`, { headers, body: { age: 40 } });
    expect(first.status, first.text).to.equal(200);
    await expireTenant(tenant);
    await purge();
    expect(await tombstoneOf(scopeKey(tenant, user.id, 'users.update', key))).to.not.equal(undefined);
    for (const age of [40, 41]) {
      expectFailure(await http('PATCH', `/api/v1/users/${user.id}`, { headers, body: { age } }), 409, 40905);
    }
    expect((await userRow(user.id))?.age).to.equal(40);
    const fresh = await http('PATCH', `/api/v1/users/${user.id}`, {
      headers: { ...headers, 'Idempotency-Key': idempotencyKey() },
      body: { age: 41 },
    });
    expect(fresh.status, fresh.text).to.equal(200);
    expect((await userRow(user.id))?.age).to.equal(41);
  });
});

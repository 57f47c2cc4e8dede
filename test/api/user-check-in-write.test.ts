// A keyless create by an admin's token reads no user row first: its INSERT carries the auth rule
// (routers/auth/who.ts userCheck, migration 20261125000001; routers/trpc.ts authedProcedure). These tests hold it to the
// answers of the read-first path: DISABLED and demoted users refused (and nothing written), the
// row's role winning, a DISABLED user's 403 before a 400, and one round trip for a create.
import { expect } from 'chai';
import { QueryTypes } from 'sequelize';
import { http } from '../support/http.js';
import { queriesDuring } from '../support/queries.js';
import { sharedServer } from '../support/server.js';
import { bearer, idempotencyKey, uniqueTenant } from '../support/tokens.js';
import { trpcMutation } from '../support/trpc-http.js';
import { adminOf, createUser, expectError, expectSuccess, uniqueUsername } from '../support/users.js';

/** How many users the tenant has with this name. */
async function usersNamed(tenant: string, name: string): Promise<number> {
  const { sequelize } = (await sharedServer()).services;
  const [row] = await sequelize.query<{ n: number }>(
    'SELECT count(*)::int AS n FROM users WHERE tenant_id = :tenant AND name = :name',
    { replacements: { tenant, name }, type: QueryTypes.SELECT },
  );
  return row.n;
}

/** A create by a new admin of a new tenant, with the queries the server sent for it. */
async function createCounted(name: string, headers: Record<string, string> = {}) {
  await sharedServer();
  const tenant = uniqueTenant('ride');
  const admin = await createUser(tenant, { role: 'admin' });
  let status = 0;
  const texts = await queriesDuring(async () => {
    const res = await http('POST', '/api/v1/users', {
      headers: { ...bearer(tenant, admin.id, 'admin'), ...headers },
      body: { name, age: 3 },
    });
    status = res.status;
  });
  return { tenant, status, texts };
}

describe('keyless create: the user check rides in the INSERT (one round trip), with the answers of a read first', () => {
  it('when an active admin creates a user without a key, then 201 in one round trip: the insert with the user row check (user_insert_checked), no read before it', async () => {
    const { tenant, status, texts } = await createCounted('Ride');
    expect(status).to.equal(201);
    expect(texts, texts.join('\n')).to.have.length(1);
    expect(texts[0]).to.match(/^SELECT \* FROM user_insert_checked\(/);
    expect(await usersNamed(tenant, 'Ride')).to.equal(1);
  });

  it('when the admin row is DISABLED, then 403 "User is disabled" on REST and tRPC, and nothing is created', async () => {
    const tenant = uniqueTenant('ride');
    const disabled = await createUser(tenant, { role: 'admin', status: 'DISABLED' });
    const headers = bearer(tenant, disabled.id, 'admin');
    const rest = await http('POST', '/api/v1/users', { headers, body: { name: 'Nope', age: 3 } });
    expectError(rest, 403);
    expect(rest.body.message).to.equal('User is disabled');
    const trpc = await trpcMutation('users.create', { name: 'Nope', age: 3 }, headers);
    expect(trpc.status).to.equal(403);
    expect(trpc.body.error.message).to.equal('User is disabled');
    expect(await usersNamed(tenant, 'Nope')).to.equal(0);
  });

  it('when a DISABLED admin sends an invalid body or a taken username, then 403 (it ranks with 401, before 400 and 409)', async () => {
    const tenant = uniqueTenant('ride');
    const username = uniqueUsername();
    await createUser(tenant, { username });
    const disabled = await createUser(tenant, { role: 'admin', status: 'DISABLED' });
    const headers = bearer(tenant, disabled.id, 'admin');
    const invalid = await http('POST', '/api/v1/users', { headers, body: { name: '', age: -1, extra: 1 } });
    expectError(invalid, 403);
    expect(invalid.body.message).to.equal('User is disabled');
    const taken = await http('POST', '/api/v1/users', { headers, body: { name: 'Taken', age: 3, username } });
    expectError(taken, 403);
    // The same requests from an active admin: 400 and 409.
    expectError(
      await http('POST', '/api/v1/users', { headers: adminOf(tenant), body: { name: '', age: -1 } }),
      400,
    );
    expectError(
      await http('POST', '/api/v1/users', {
        headers: adminOf(tenant),
        body: { name: 'Taken', age: 3, username },
      }),
      409,
      40904,
    );
  });

  it("when the row's role is 'user' but the token claims admin, then 403 \"Admin role required\" and nothing is created; a user token whose row is admin creates", async () => {
    const tenant = uniqueTenant('ride');
    const demoted = await createUser(tenant, { role: 'user' });
    const refused = await http('POST', '/api/v1/users', {
      headers: bearer(tenant, demoted.id, 'admin'),
      body: { name: 'Demoted', age: 3 },
    });
    expectError(refused, 403);
    expect(refused.body.message).to.equal('Admin role required');
    expect(await usersNamed(tenant, 'Demoted')).to.equal(0);

    const promoted = await createUser(tenant, { role: 'admin' });
    const made = await http('POST', '/api/v1/users', {
      headers: bearer(tenant, promoted.id, 'user'),
      body: { name: 'Promoted', age: 3 },
    });
    expectSuccess(made, 201);
    expect(await usersNamed(tenant, 'Promoted')).to.equal(1);
  });

  it('when the token has no user row in its tenant (an operator, or a row of another tenant), then its own role decides', async () => {
    const tenant = uniqueTenant('ride');
    const elsewhere = await createUser(uniqueTenant('ride'), { role: 'user', status: 'DISABLED' });
    expectSuccess(
      await http('POST', '/api/v1/users', {
        headers: bearer(tenant, elsewhere.id, 'admin'),
        body: { name: 'Op', age: 3 },
      }),
      201,
    );
    expectSuccess(
      await http('POST', '/api/v1/users', { headers: adminOf(tenant), body: { name: 'Op', age: 4 } }),
      201,
    );
    expect(await usersNamed(tenant, 'Op')).to.equal(2);
  });

  it('when the admin is disabled between two creates, then the second is refused at once (no cached check)', async () => {
    const tenant = uniqueTenant('ride');
    const admin = await createUser(tenant, { role: 'admin' });
    const headers = bearer(tenant, admin.id, 'admin');
    expectSuccess(await http('POST', '/api/v1/users', { headers, body: { name: 'Before', age: 3 } }), 201);
    expectSuccess(
      await http('PUT', `/api/v1/users/${admin.id}/status`, {
        headers: adminOf(tenant),
        body: { status: 'DISABLED' },
      }),
    );
    expectError(await http('POST', '/api/v1/users', { headers, body: { name: 'After', age: 3 } }), 403);
    expect(await usersNamed(tenant, 'After')).to.equal(0);
  });

  it("when the create carries a key, then the check rides in the keyed create's one statement too (idem_execute): no read of the row before it", async () => {
    const { status, texts } = await createCounted('Keyed', { 'Idempotency-Key': idempotencyKey() });
    expect(status).to.equal(201);
    expect(
      texts.filter((t) => /idem_auth_read/.test(t)),
      texts.join('\n'),
    ).to.have.length(0);
    expect(
      texts.filter((t) => /^SELECT \* FROM idem_execute\(/.test(t)),
      texts.join('\n'),
    ).to.have.length(1);
  });
});

describe("keyed create in one statement (idem_execute): the user row's rule, with the answers of a read first", () => {
  const keyed = (tenant: string, userId: string, role: 'admin' | 'user', key: string, body: object) =>
    http('POST', '/api/v1/users', {
      headers: { ...bearer(tenant, userId, role), 'Idempotency-Key': key },
      body,
    });

  /** The idempotency records of this tenant (none is written for a refused request). */
  async function recordCount(tenant: string): Promise<number> {
    const { sequelize } = (await sharedServer()).services;
    const [row] = await sequelize.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM idempotency_records WHERE scope_key LIKE :prefix',
      { replacements: { prefix: `${tenant}:%` }, type: QueryTypes.SELECT },
    );
    return row.n;
  }

  it('when a DISABLED admin creates with a key, then 403 "User is disabled" on REST and tRPC, and neither the user nor a record is written', async () => {
    const tenant = uniqueTenant('ridek');
    const admin = await createUser(tenant, { role: 'admin', status: 'DISABLED' });
    const rest = await keyed(tenant, admin.id, 'admin', idempotencyKey(), { name: 'Nope', age: 3 });
    expectError(rest, 403);
    expect(rest.body.message).to.equal('User is disabled');
    const trpc = await trpcMutation(
      'users.create',
      { name: 'Nope', age: 3 },
      {
        ...bearer(tenant, admin.id, 'admin'),
        'Idempotency-Key': idempotencyKey(),
      },
    );
    expect(trpc.status).to.equal(403);
    expect(trpc.body.error.message).to.equal('User is disabled');
    expect(await usersNamed(tenant, 'Nope')).to.equal(0);
    expect(await recordCount(tenant)).to.equal(0);
  });

  it("when the row's role is 'user' but the token claims admin, then 403 \"Admin role required\" with a key, and nothing is written", async () => {
    const tenant = uniqueTenant('ridek');
    const demoted = await createUser(tenant, { role: 'user' });
    const res = await keyed(tenant, demoted.id, 'admin', idempotencyKey(), { name: 'Demoted', age: 3 });
    expectError(res, 403);
    expect(res.body.message).to.equal('Admin role required');
    expect(await usersNamed(tenant, 'Demoted')).to.equal(0);
    expect(await recordCount(tenant)).to.equal(0);
  });

  it('when a DISABLED admin sends an invalid body with a key, then 403 (it ranks with 401, before 400); an active admin gets the 400', async () => {
    const tenant = uniqueTenant('ridek');
    const disabled = await createUser(tenant, { role: 'admin', status: 'DISABLED' });
    expectError(await keyed(tenant, disabled.id, 'admin', idempotencyKey(), { name: '', age: 3 }), 403);
    const active = await createUser(tenant, { role: 'admin' });
    expectError(await keyed(tenant, active.id, 'admin', idempotencyKey(), { name: '', age: 3 }), 400);
  });

  it('when the admin is disabled after a keyed create, then its replay is refused 403 at once, and a new key too', async () => {
    const tenant = uniqueTenant('ridek');
    const admin = await createUser(tenant, { role: 'admin' });
    const key = idempotencyKey();
    const body = { name: 'Once', age: 3 };
    expectSuccess(await keyed(tenant, admin.id, 'admin', key, body), 201);
    expectSuccess(
      await http('PUT', `/api/v1/users/${admin.id}/status`, {
        headers: adminOf(tenant),
        body: { status: 'DISABLED' },
      }),
    );
    expectError(await keyed(tenant, admin.id, 'admin', key, body), 403);
    expectError(await keyed(tenant, admin.id, 'admin', idempotencyKey(), body), 403);
    expect(await usersNamed(tenant, 'Once')).to.equal(1);
  });

  it('when the token has no user row in its tenant, then its own role decides with a key too (an admin token creates)', async () => {
    const tenant = uniqueTenant('ridek');
    expectSuccess(await keyed(tenant, '990000001', 'admin', idempotencyKey(), { name: 'Op', age: 3 }), 201);
    expect(await usersNamed(tenant, 'Op')).to.equal(1);
  });

  it('when a keyed create meets a taken username, then 409 40904 is stored (the general path, after a savepoint) and replayed, and nothing is doubled', async () => {
    const tenant = uniqueTenant('ridek');
    const admin = await createUser(tenant, { role: 'admin' });
    const username = uniqueUsername();
    expectSuccess(
      await keyed(tenant, admin.id, 'admin', idempotencyKey(), { name: 'First', age: 3, username }),
      201,
    );
    const key = idempotencyKey();
    const body = { name: 'Second', age: 3, username };
    const first = await keyed(tenant, admin.id, 'admin', key, body);
    expectError(first, 409, 40904);
    const again = await keyed(tenant, admin.id, 'admin', key, body);
    expectError(again, 409, 40904);
    expect(again.headers.get('idempotent-replayed')).to.equal('true');
    expect(again.text).to.equal(first.text);
    expect(await usersNamed(tenant, 'Second')).to.equal(0);
    const { sequelize } = (await sharedServer()).services;
    const rows = await sequelize.query<{ status: string; http_status: number }>(
      'SELECT status, http_status FROM idempotency_records WHERE scope_key LIKE :k',
      { replacements: { k: `%:${key}` }, type: QueryTypes.SELECT },
    );
    expect(rows).to.deep.equal([{ status: 'FAILED_FINAL', http_status: 409 }]);
  });
});

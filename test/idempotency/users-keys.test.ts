import { expect } from 'chai';
import { scopeKey } from '../../idempotency/key.js';
import { http } from '../support/http.js';
import { sharedServer } from '../support/server.js';
import { bearer, idempotencyKey, uniqueTenant } from '../support/tokens.js';
import { adminOf, createUser, OPERATOR_ID, userRow } from '../support/users.js';
import { expectFailure, holdingTransaction, recordsOf, viaTrpc } from './support.js';

const replayed = (res: { headers: Headers }) => res.headers.get('idempotent-replayed');

describe('Idempotency-Key on users mutations (optional key, Mode A)', () => {
  it('when a PUT is repeated with its key after another change, then the original answer is replayed and the later change is not undone', async () => {
    const tenant = uniqueTenant();
    const user = await createUser(tenant, { username: 'put_me' });
    const headers = { ...adminOf(tenant), 'Idempotency-Key': idempotencyKey() };
    const body = { name: 'Replaced', age: 50, username: 'put_me2', email: null };
    const first = await http('PUT', `/api/v1/users/${user.id}`, { headers, body });
    expect(first.status, first.text).to.equal(200);
    expect(first.body.data.name).to.equal('Replaced');
    expect(replayed(first)).to.equal(null);

    const later = await http('PATCH', `/api/v1/users/${user.id}`, {
      headers: adminOf(tenant),
      body: { age: 51 },
    });
    expect(later.status).to.equal(200);

    const again = await http('PUT', `/api/v1/users/${user.id}`, { headers, body });
    expect(again.status).to.equal(200);
    expect(again.body).to.deep.equal(first.body);
    expect(replayed(again)).to.equal('true');
    expect((await userRow(user.id))?.age).to.equal(51);

    const other = await http('PUT', `/api/v1/users/${user.id}`, { headers, body: { ...body, age: 52 } });
    expectFailure(other, 409, 40901);
    expect((await userRow(user.id))?.age).to.equal(51);
  });

  it('when a user PATCHes itself with a key twice (REST then tRPC), then one change and the replay', async () => {
    const tenant = uniqueTenant();
    const user = await createUser(tenant, { name: 'Self' });
    const headers = { ...bearer(tenant, user.id), 'Idempotency-Key': idempotencyKey() };
    const first = await http('PATCH', `/api/v1/users/${user.id}`, { headers, body: { name: 'Self Two' } });
    expect(first.status, first.text).to.equal(200);
    const again = await viaTrpc((await sharedServer()).url, headers, (c) =>
      c.users.update.mutate({ id: user.id, name: 'Self Two' }),
    );
    expect(again.status).to.equal(200);
    expect(again.body).to.deep.equal(first.body);
    expect(replayed(again)).to.equal('true');
    const records = await recordsOf(tenant);
    expect(records.filter((r) => r.operation === 'users.update').map((r) => r.status)).to.deep.equal([
      'SUCCEEDED',
    ]);
    expect(records.find((r) => r.operation === 'users.update')?.scope_key).to.equal(
      scopeKey(tenant, user.id, 'users.update', headers['Idempotency-Key']),
    );
  });

  it('when a user PATCHes another user (403) with a key, then the retry replays the 403 with Idempotent-Replayed', async () => {
    const tenant = uniqueTenant();
    const me = await createUser(tenant, { name: 'Me' });
    const other = await createUser(tenant, { name: 'Other' });
    const headers = { ...bearer(tenant, me.id), 'Idempotency-Key': idempotencyKey() };
    const first = await http('PATCH', `/api/v1/users/${other.id}`, { headers, body: { name: 'Hijacked' } });
    expectFailure(first, 403);
    expect(replayed(first)).to.equal(null);
    const again = await http('PATCH', `/api/v1/users/${other.id}`, { headers, body: { name: 'Hijacked' } });
    expectFailure(again, 403);
    expect(again.body).to.deep.equal(first.body);
    expect(replayed(again)).to.equal('true');
    expect((await userRow(other.id))?.name).to.equal('Other');
    const record = (await recordsOf(tenant)).find((r) => r.operation === 'users.update');
    expect([record?.status, record?.http_status]).to.deep.equal(['FAILED_FINAL', 403]);
  });

  it('when a status change goes to the alias and then the canonical path with one key, then one record and the replay', async () => {
    const tenant = uniqueTenant();
    const user = await createUser(tenant);
    const headers = { ...adminOf(tenant), 'Idempotency-Key': idempotencyKey() };
    const first = await http('PUT', `/users/${user.id}/status`, { headers, body: { status: 'DISABLED' } });
    expect(first.status, first.text).to.equal(200);
    expect(first.body.data.status).to.equal('DISABLED');
    // Re-enable behind the key's back: a re-execution would disable again, a replay does not.
    expect(
      (
        await http('PUT', `/api/v1/users/${user.id}/status`, {
          headers: adminOf(tenant),
          body: { status: 'ACTIVE' },
        })
      ).status,
    ).to.equal(200);
    const again = await http('PUT', `/api/v1/users/${user.id}/status`, {
      headers,
      body: { status: 'DISABLED' },
    });
    expect(again.status).to.equal(200);
    expect(again.body).to.deep.equal(first.body);
    expect(replayed(again)).to.equal('true');
    expect((await userRow(user.id))?.status).to.equal('ACTIVE');
    expect((await recordsOf(tenant)).filter((r) => r.operation === 'users.setStatus')).to.have.length(1);
  });

  it('when a DELETE is repeated with its key, then 204 without a body and Idempotent-Replayed; without a key a second DELETE is 404', async () => {
    const tenant = uniqueTenant();
    const user = await createUser(tenant);
    const headers = { ...adminOf(tenant), 'Idempotency-Key': idempotencyKey() };
    const first = await http('DELETE', `/api/v1/users/${user.id}`, { headers });
    expect(first.status).to.equal(204);
    expect(first.text).to.equal('');
    expect(replayed(first)).to.equal(null);

    const again = await http('DELETE', `/api/users/${user.id}`, { headers });
    expect(again.status).to.equal(204);
    expect(again.text).to.equal('');
    expect(again.headers.get('content-type')).to.equal(null);
    expect(replayed(again)).to.equal('true');

    const viaTrpcAgain = await viaTrpc((await sharedServer()).url, headers, (c) =>
      c.users.delete.mutate({ id: user.id }),
    );
    expect(viaTrpcAgain.status).to.equal(200);
    expect(viaTrpcAgain.body).to.equal(undefined);
    expect(replayed(viaTrpcAgain)).to.equal('true');

    const withoutKey = await http('DELETE', `/api/v1/users/${user.id}`, { headers: adminOf(tenant) });
    expectFailure(withoutKey, 404);
    expect(replayed(withoutKey)).to.equal(null);
    expect(await userRow(user.id)).to.equal(undefined);
    const record = (await recordsOf(tenant)).find((r) => r.operation === 'users.delete');
    expect([record?.status, record?.http_status, record?.resource_id]).to.deep.equal([
      'SUCCEEDED',
      204,
      null,
    ]);
  });

  it('when a user create goes over tRPC with a key and REST retries it, then REST replays the original 201 with Location', async () => {
    const tenant = uniqueTenant();
    const headers = { ...adminOf(tenant), 'Idempotency-Key': idempotencyKey() };
    const body = { name: 'Cross', age: 22, username: 'cross_t' };
    const trpc = await viaTrpc((await sharedServer()).url, headers, (c) => c.users.create.mutate(body));
    expect(trpc.status).to.equal(200);
    const rest = await http('POST', '/api/users', { headers, body });
    expect(rest.status).to.equal(201);
    expect(rest.body).to.deep.equal(trpc.body);
    expect(rest.headers.get('location')).to.equal(`/api/v1/users/${trpc.body.data.id}`);
    expect(replayed(rest)).to.equal('true');
    const list = await http('GET', '/api/v2/users', { headers: adminOf(tenant) });
    expect(list.body.data.total).to.equal(1);
  });

  it('when one key is reused for the same operation on another path id, then 409/40901 (path parameters are fingerprinted)', async () => {
    const tenant = uniqueTenant();
    const one = await createUser(tenant, { name: 'One' });
    const two = await createUser(tenant, { name: 'Two' });
    const headers = { ...adminOf(tenant), 'Idempotency-Key': idempotencyKey() };
    expect((await http('PATCH', `/api/v1/users/${one.id}`, { headers, body: { age: 70 } })).status).to.equal(
      200,
    );
    expectFailure(await http('PATCH', `/api/v1/users/${two.id}`, { headers, body: { age: 70 } }), 409, 40901);
    expect((await userRow(one.id))?.age).to.equal(70);
    expect((await userRow(two.id))?.age).to.equal(30);
  });

  it('when a non-admin sends an admin-only mutation with a key, then 403 before the protocol: no record, and a retry with another body is 403 too (not 40901)', async () => {
    const tenant = uniqueTenant();
    const member = await createUser(tenant, { name: 'Member' });
    const headers = { ...bearer(tenant, member.id), 'Idempotency-Key': idempotencyKey() };
    // CONTRACT section 3: authorisation (403) answers before the idempotency conflict (409).
    expectFailure(await http('POST', '/api/v1/users', { headers, body: { name: 'X', age: 1 } }), 403);
    expectFailure(await http('POST', '/api/v1/users', { headers, body: { name: 'Y', age: 2 } }), 403);
    expectFailure(await http('DELETE', `/api/v1/users/${member.id}`, { headers }), 403);
    expect(await recordsOf(tenant)).to.deep.equal([]);
    expect(await userRow(member.id)).to.not.equal(undefined);
  });

  it('when users mutations carry no key, then they run without any record (the server never invents a key)', async () => {
    const tenant = uniqueTenant();
    const user = await createUser(tenant);
    expect(
      (await http('PATCH', `/api/v1/users/${user.id}`, { headers: adminOf(tenant), body: { age: 9 } }))
        .status,
    ).to.equal(200);
    expect((await http('DELETE', `/api/v1/users/${user.id}`, { headers: adminOf(tenant) })).status).to.equal(
      204,
    );
    expect(await recordsOf(tenant)).to.deep.equal([]);
  });

  it('when a users mutation carries a malformed key, then 400 before anything runs (even before the admin check)', async () => {
    const tenant = uniqueTenant();
    const user = await createUser(tenant, { name: 'Keep' });
    const asUser = await http('PUT', `/api/v1/users/${user.id}/status`, {
      headers: { ...bearer(tenant, user.id), 'Idempotency-Key': 'short' },
      body: { status: 'DISABLED' },
    });
    expectFailure(asUser, 400);
    expect(asUser.body.message).to.match(/^Idempotency-Key: /);
    const asAdmin = await http('PATCH', `/api/v1/users/${user.id}`, {
      headers: { ...bearer(tenant, OPERATOR_ID, 'admin'), 'Idempotency-Key': 'x'.repeat(65) },
      body: { name: 'Changed' },
    });
    expectFailure(asAdmin, 400);
    expect((await userRow(user.id))?.name).to.equal('Keep');
    expect((await userRow(user.id))?.status).to.equal('ACTIVE');
    expect(await recordsOf(tenant)).to.deep.equal([]);
  });

  it('when a PATCH of a user finds its key in flight past the wait bound, then 202 names that user: Location /api/v1/users/{id} and data.resourceId', async () => {
    const tenant = uniqueTenant();
    const user = await createUser(tenant, { username: 'in_flight' });
    const key = idempotencyKey();
    const headers = { ...adminOf(tenant), 'Idempotency-Key': key };
    // As a duplicate in flight on another instance: its transaction holds the key's lock.
    const answer = await holdingTransaction(async (holder) => {
      await holder.query('SELECT pg_advisory_xact_lock(7648, hashtext($1))', [
        scopeKey(tenant, OPERATOR_ID, 'users.update', key),
      ]);
      return http('PATCH', `/api/v1/users/${user.id}`, { headers, body: { age: 9 } });
    });
    expect(answer.status, answer.text).to.equal(202);
    expect(answer.headers.get('location')).to.equal(`/api/v1/users/${user.id}`);
    expect(answer.body.data).to.deep.equal({ status: 'PROCESSING', resourceId: String(user.id) });
    expect(answer.headers.get('retry-after')).to.match(/^[1-9][0-9]*$/);
  });
});

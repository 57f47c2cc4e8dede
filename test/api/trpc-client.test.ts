import { createTRPCClient, httpLink, TRPCClientError } from '@trpc/client';
import { expect } from 'chai';
import type { AppRouter } from '../../routers/index.js';
import { type HttpResult, http } from '../support/http.js';
import { sharedServer } from '../support/server.js';
import { bearer, idempotencyKey, uniqueTenant } from '../support/tokens.js';
import { trpcMutation, trpcQuery } from '../support/trpc-http.js';
import { adminOf, createUser, expectSuccess, uniqueUsername } from '../support/users.js';

async function clientFor(headers: Record<string, string>) {
  const base = (await sharedServer()).url;
  // httpLink, not httpBatchLink: batching is disabled on the server.
  return createTRPCClient<AppRouter>({ links: [httpLink({ url: `${base}/trpc`, headers: () => headers })] });
}

async function trpcError(call: Promise<unknown>): Promise<TRPCClientError<AppRouter>> {
  const err = await call.then(
    () => expect.fail('the call succeeded'),
    (e: unknown) => e,
  );
  expect(err).to.be.instanceOf(TRPCClientError);
  return err as TRPCClientError<AppRouter>;
}

/** The error's data says the same as the REST answer to the same request, and carries no stack. */
function expectSameAsRest(err: TRPCClientError<AppRouter>, rest: HttpResult, businessCode: number) {
  expect(rest.status).to.be.greaterThanOrEqual(400);
  expect(err.data).to.have.all.keys('code', 'httpStatus', 'businessCode', 'path');
  expect(err.data?.httpStatus).to.equal(rest.status);
  expect(err.data?.businessCode).to.equal(businessCode);
  expect(rest.body.code).to.equal(businessCode);
  expect(err.message).to.equal(rest.body.message);
  expect(JSON.stringify(err.shape)).to.not.match(/stack|\.ts:\d+/);
}

describe('tRPC transport: typed @trpc/client over HTTP', () => {
  it('when an admin creates, gets and lists users, then the payloads are the REST ones', async () => {
    const tenant = uniqueTenant();
    const client = await clientFor(adminOf(tenant));
    const created = await client.users.create.mutate({ name: 'Ann', age: 30, username: uniqueUsername() });
    if (created.code !== 200) expect.fail(`create answered ${created.code}`);
    expect(created.message).to.equal('Success');
    const user = created.data;
    expect(user).to.include({ name: 'Ann', age: 30, role: 'user', status: 'ACTIVE' });
    const rest = expectSuccess(await http('GET', `/api/v1/users/${user.id}`, { headers: adminOf(tenant) }));
    expect(rest).to.deep.equal(user);
    expect(await client.users.get.query({ id: user.id })).to.deep.equal({
      code: 200,
      message: 'Success',
      data: user,
    });
    expect((await client.users.list.query({})).data).to.deep.equal([user]);
    expect((await client.users.listPage.query({ size: 5 })).data).to.deep.equal({
      items: [user],
      page: 1,
      size: 5,
      total: 1,
    });
  });

  it('when a username is taken, then a TRPCClientError with httpStatus 409 and businessCode 40904', async () => {
    const tenant = uniqueTenant();
    const username = uniqueUsername();
    await createUser(tenant, { username });
    const client = await clientFor(adminOf(tenant));
    const err = await trpcError(client.users.create.mutate({ name: 'B', age: 1, username }));
    expect(err.data?.code).to.equal('CONFLICT');
    const rest = await http('POST', '/api/v1/users', {
      headers: adminOf(tenant),
      body: { name: 'B', age: 1, username },
    });
    expectSameAsRest(err, rest, 40904);
  });

  it('when a user is missing, then httpStatus 404 and businessCode 404, as on REST', async () => {
    const tenant = uniqueTenant();
    const client = await clientFor(adminOf(tenant));
    const err = await trpcError(client.users.get.query({ id: '9000000000000000000' }));
    expect(err.data?.code).to.equal('NOT_FOUND');
    expectSameAsRest(
      err,
      await http('GET', '/api/v1/users/9000000000000000000', { headers: adminOf(tenant) }),
      404,
    );
  });

  it('when the token is missing, the role is wrong or a field is invalid, then 401, 403 and 400 as on REST', async () => {
    const tenant = uniqueTenant();
    const anonymous = await clientFor({});
    expectSameAsRest(
      await trpcError(anonymous.users.list.query({})),
      await http('GET', '/api/v1/users'),
      401,
    );
    const member = bearer(tenant, '900000004', 'user');
    expectSameAsRest(
      await trpcError((await clientFor(member)).users.list.query({})),
      await http('GET', '/api/v1/users', { headers: member }),
      403,
    );
    const admin = await clientFor(adminOf(tenant));
    const invalid = await trpcError(admin.users.create.mutate({ name: '', age: 30 }));
    expect(invalid.message).to.match(/^name: /);
    const rest = await http('POST', '/api/v1/users', {
      headers: adminOf(tenant),
      body: { name: '', age: 30 },
    });
    expectSameAsRest(invalid, rest, 400);
    const badId = await trpcError(admin.users.get.query({ id: 'abc' }));
    expectSameAsRest(badId, await http('GET', '/api/v1/users/abc', { headers: adminOf(tenant) }), 400);
  });
});

describe('tRPC transport: wire format', () => {
  it('when users.get is called as GET /trpc/users.get?input=<JSON>, then result.data is the REST envelope', async () => {
    const tenant = uniqueTenant();
    const user = await createUser(tenant);
    const res = await trpcQuery(
      'users.get',
      { id: user.id },
      { ...adminOf(tenant), 'X-Request-Id': 'trpc-wire-1' },
    );
    expect(res.status).to.equal(200);
    expect(res.headers.get('content-type')).to.match(/^application\/json/);
    expect(res.headers.get('x-request-id')).to.equal('trpc-wire-1');
    const rest = await http('GET', `/api/v1/users/${user.id}`, { headers: adminOf(tenant) });
    expect(res.body).to.deep.equal({ result: { data: rest.body } });
  });

  it('when users.create is called as POST with a JSON body, then result.data is the envelope and Location is set', async () => {
    const tenant = uniqueTenant();
    const res = await trpcMutation('users.create', { name: 'Wire', age: 20 }, adminOf(tenant));
    expect(res.status).to.be.within(200, 201);
    const { data } = res.body.result;
    expect(data).to.include({ code: 200, message: 'Success' });
    expect(data.data).to.include({ name: 'Wire', age: 20, role: 'user', status: 'ACTIVE' });
    expect(res.headers.get('location')).to.equal(`/api/v1/users/${data.data.id}`);
    const rest = expectSuccess(
      await http('GET', `/api/v1/users/${data.data.id}`, { headers: adminOf(tenant) }),
    );
    expect(rest).to.deep.equal(data.data);
  });

  it('when a mutation is called with GET or a batch is sent, then tRPC refuses it and nothing is created', async () => {
    const tenant = uniqueTenant();
    const viaGet = await trpcQuery('users.create', { name: 'X', age: 1 }, adminOf(tenant));
    expect(viaGet.status).to.equal(405);
    expect(viaGet.body.error.data.httpStatus).to.equal(405);
    const batch = await http(
      'GET',
      `/trpc/users.list,users.list?batch=1&input=${encodeURIComponent('{"0":{},"1":{}}')}`,
      {
        headers: adminOf(tenant),
      },
    );
    expect(batch.status).to.equal(400);
    expect(expectSuccess(await http('GET', '/api/v1/users', { headers: adminOf(tenant) }))).to.deep.equal([]);
  });

  it('when one Idempotency-Key is used on REST and then on tRPC, then tRPC replays the REST answer', async () => {
    const tenant = uniqueTenant();
    const headers = { ...adminOf(tenant), 'Idempotency-Key': idempotencyKey() };
    const body = { name: 'Once', age: 40 };
    const first = await http('POST', '/api/v1/users', { headers, body });
    const user = expectSuccess(first, 201);
    const retry = await trpcMutation('users.create', body, headers);
    expect(retry.headers.get('idempotent-replayed')).to.equal('true');
    expect(retry.body.result.data).to.deep.equal(first.body);
    expect(expectSuccess(await http('GET', '/api/v1/users', { headers: adminOf(tenant) }))).to.deep.equal([
      user,
    ]);
  });
});

import { TRPC_ERROR_CODES_BY_KEY } from '@trpc/server/rpc';
import { expect } from 'chai';
import { type HttpResult, http } from '../support/http.js';
import { bearer, uniqueTenant } from '../support/tokens.js';
import { trpcMutation, trpcQuery } from '../support/trpc-http.js';
import { adminOf, createUser, expectError, expectSuccess, uniqueUsername } from '../support/users.js';

const MAX_BODY_BYTES = 65536;
const STACK = /\bat\s+\S+\s+\(|\.ts:\d+|\.js:\d+|node_modules|"stack"/;
const post = (raw: string, headers: Record<string, string>, contentType = 'application/json') =>
  http('POST', '/api/v1/users', { raw, headers: { ...headers, 'Content-Type': contentType } });

/** A JSON user body of exactly `bytes` bytes (its name is far too long, so it is a 400 when read). */
function bodyOfSize(bytes: number): string {
  const frame = JSON.stringify({ name: '', age: 30 });
  return frame.replace('""', `"${'n'.repeat(bytes - frame.length)}"`);
}

describe('errors: the envelope', () => {
  it('when requests fail in every way, then each body is {code, message, data: null} as JSON without a stack', async () => {
    const tenant = uniqueTenant();
    const admin = adminOf(tenant);
    const taken = uniqueUsername();
    await createUser(tenant, { username: taken });
    const cases: Array<[number, number, HttpResult]> = [
      [400, 400, await http('POST', '/api/v1/users', { headers: admin, body: { name: '' } })],
      [400, 400, await post('{"name":', admin)],
      [401, 401, await http('GET', '/api/v1/users')],
      [403, 403, await http('GET', '/api/v1/users', { headers: bearer(tenant, '900000002', 'user') })],
      [404, 404, await http('GET', '/api/v1/users/9000000000000000000', { headers: admin })],
      [404, 404, await http('GET', '/no/such/path')],
      [405, 405, await http('DELETE', '/api/v1/users')],
      [
        409,
        40904,
        await http('POST', '/api/v1/users', { headers: admin, body: { name: 'B', age: 1, username: taken } }),
      ],
      [413, 413, await post(bodyOfSize(MAX_BODY_BYTES + 1), admin)],
      [415, 415, await post('{}', admin, 'text/plain')],
    ];
    for (const [status, code, res] of cases) {
      expectError(res, status, code);
      expect(res.text).to.not.match(STACK);
      expect(res.headers.get('x-request-id')).to.be.a('string');
    }
  });

  it('when tRPC calls fail, then the error data carries httpStatus and businessCode and no stack', async () => {
    const tenant = uniqueTenant();
    const results = [
      await trpcQuery('users.get', { id: 'abc' }, adminOf(tenant)),
      await trpcQuery('users.get', { id: '9000000000000000000' }, adminOf(tenant)),
      await trpcMutation('users.create', { name: 'Ann', age: 30 }, {}),
      await http('POST', '/trpc/users.create', {
        raw: '{"name":',
        headers: { ...adminOf(tenant), 'Content-Type': 'application/json' },
      }),
    ];
    expect(results.map((r) => r.status)).to.deep.equal([400, 404, 401, 400]);
    for (const res of results) {
      expect(res.text).to.not.match(STACK);
      expect(res.body.error.data).to.have.all.keys('code', 'httpStatus', 'businessCode', 'path');
      expect(res.body.error.data.httpStatus).to.equal(res.status);
    }
  });

  it("when a tRPC call sends a body that is not application/json, then 415 in tRPC's error format, not the REST envelope", async () => {
    const tenant = uniqueTenant();
    const user = await createUser(tenant);
    const calls: Array<[string, string]> = [
      ['users.update', JSON.stringify({ id: user.id, name: 'B' })],
      ['orders.create', JSON.stringify({ merchantOrderNo: 'm-415', amount: '1.00' })],
      ['users.get', JSON.stringify({ id: user.id })],
    ];
    for (const [path, raw] of calls) {
      for (const type of ['text/plain', 'application/json; charset=latin1']) {
        const res = await http('POST', `/trpc/${path}`, {
          raw,
          headers: { ...adminOf(tenant), 'Content-Type': type },
        });
        expect(res.status, `${path} as ${type}: ${res.text}`).to.equal(415);
        expect(res.headers.get('content-type')).to.match(/^application\/json/);
        expect(res.body).to.have.all.keys('error');
        expect(res.body.error).to.deep.equal({
          message: 'Content-Type must be application/json',
          code: TRPC_ERROR_CODES_BY_KEY.UNSUPPORTED_MEDIA_TYPE,
          data: { code: 'UNSUPPORTED_MEDIA_TYPE', httpStatus: 415, businessCode: 415, path },
        });
      }
    }
  });

  it('when a field fails, then the 400 message is "<field path>: <message>" of the first failing field', async () => {
    const headers = adminOf(uniqueTenant());
    const both = await http('POST', '/api/v1/users', { headers, body: { age: 999, name: '' } });
    expectError(both, 400);
    expect(both.body.message).to.match(/^name: \S/);
    const age = await http('POST', '/api/v1/users', { headers, body: { name: 'Ann', age: 999 } });
    expect(age.body.message).to.match(/^age: \S/);
  });

  for (const raw of ['{"name":', '{"name":"A",}', "{'name':'A'}", 'nul', '{"name":"A"} trailing']) {
    it(`when the JSON body is malformed (${raw}), then 400 and nothing is created`, async () => {
      const tenant = uniqueTenant();
      const res = await post(raw, adminOf(tenant));
      expectError(res, 400);
      expect(res.body.message).to.match(/^body: /);
      expect(expectSuccess(await http('GET', '/api/v1/users', { headers: adminOf(tenant) }))).to.deep.equal(
        [],
      );
    });
  }

  for (const raw of ['[]', '[{"name":"A","age":1}]', '"text"', '42', 'null', 'true']) {
    it(`when the JSON body is not an object (${raw}), then 400 saying so`, async () => {
      const res = await post(raw, adminOf(uniqueTenant()));
      expectError(res, 400);
      // Well-formed JSON, so not "malformed JSON" (body-parser's strict mode called it that).
      expect(res.body.message).to.equal('body: must be a JSON object');
    });
  }

  it('when a tRPC input is not an object, then 400 naming the input, over POST and GET alike', async () => {
    const headers = { ...adminOf(uniqueTenant()), 'Content-Type': 'application/json' };
    for (const raw of ['[]', '"text"', '42', 'true']) {
      const create = await http('POST', '/trpc/users.create', { raw, headers });
      expect(create.status, `users.create ${raw}: ${create.text}`).to.equal(400);
      expect(create.body.error.message).to.equal('input: must be a JSON object');
      const list = await http('GET', `/trpc/users.list?input=${encodeURIComponent(raw)}`, { headers });
      expect(list.status, `users.list ${raw}: ${list.text}`).to.equal(400);
      expect(list.body.error.message).to.equal('input: must be a JSON object');
    }
  });
});

describe('errors: body size and media type', () => {
  it('when the body is one byte over MAX_BODY_BYTES, then 413; at the limit it is read (400 for the long name)', async () => {
    const headers = adminOf(uniqueTenant());
    expectError(await post(bodyOfSize(MAX_BODY_BYTES + 1), headers), 413);
    expectError(await post(bodyOfSize(MAX_BODY_BYTES), headers), 400);
    const trpc = await http('POST', '/trpc/users.create', {
      raw: bodyOfSize(MAX_BODY_BYTES + 1),
      headers: { ...headers, 'Content-Type': 'application/json' },
    });
    expect(trpc.status).to.equal(413);
  });

  for (const type of [
    'text/plain',
    'application/xml',
    'application/x-www-form-urlencoded',
    'application/json; charset=latin1',
    'application/json; charset=utf-16',
    'application/jsonx',
  ]) {
    it(`when a POST, PUT or PATCH body is sent as ${type}, then 415`, async () => {
      const tenant = uniqueTenant();
      const user = await createUser(tenant);
      const headers = { ...adminOf(tenant), 'Content-Type': type };
      for (const [method, path] of [
        ['POST', '/api/v1/users'],
        ['PUT', `/api/v1/users/${user.id}`],
        ['PATCH', `/api/v1/users/${user.id}`],
      ]) {
        expectError(await http(method, path, { raw: '{"name":"A","age":1}', headers }), 415);
      }
    });
  }

  it('when Content-Encoding says gzip but the bytes are not gzip, then 400 (not 500)', async () => {
    const headers = { ...adminOf(uniqueTenant()), 'Content-Encoding': 'gzip' };
    const res = await post('{"name":"Ann","age":30}', headers);
    expectError(res, 400);
    expect(res.body.message).to.match(/^body: /);
  });

  it('when a POST has no Content-Type, then 415', async () => {
    expectError(await http('POST', '/api/v1/users', { headers: adminOf(uniqueTenant()) }), 415);
  });

  for (const type of [
    'application/json; charset=utf-8',
    'application/json;charset=UTF-8',
    'Application/JSON',
  ]) {
    it(`when the body is sent as ${type}, then it is accepted (201)`, async () => {
      const res = await post('{"name":"Ann","age":30}', adminOf(uniqueTenant()), type);
      expectSuccess(res, 201);
    });
  }
});

describe('errors: routing', () => {
  for (const path of ['/api/v1/nothing', '/api/v3/users', '/api', '/', '/api/v1/users/1/extra', '/trpcx']) {
    it(`when ${path} is requested, then 404 envelope`, async () => {
      expectError(await http('GET', path, { headers: adminOf(uniqueTenant()) }), 404);
    });
  }

  for (const path of [
    '/api/v1/users/',
    '/api/users/',
    '/api/v1/users/1/',
    '/docs/',
    '/healthz/',
    '/readyz/',
    '/openapi.json/',
  ]) {
    it(`when ${path} ends with a slash, then 404 envelope without a redirect`, async () => {
      const res = await http('GET', path, { headers: adminOf(uniqueTenant()) });
      expectError(res, 404);
      expect(res.headers.get('location')).to.equal(null);
    });
  }

  for (const [method, path, allow] of [
    ['DELETE', '/api/v1/users', 'GET, POST'],
    ['PATCH', '/api/users', 'GET, POST'],
    ['POST', '/api/v1/users/1', 'GET, PUT, PATCH, DELETE'],
    ['PUT', '/api/users/1', 'GET, DELETE'],
    ['GET', '/users/1/status', 'PUT'],
    ['GET', '/api/v1/users/1/status', 'PUT'],
    ['POST', '/api/v2/users', 'GET'],
    ['GET', '/api/v1/tokens', 'POST'],
    ['POST', '/healthz', 'GET'],
    ['DELETE', '/readyz', 'GET'],
    ['POST', '/docs', 'GET'],
  ]) {
    it(`when ${method} ${path} is requested without a token, then 405 with Allow: ${allow}`, async () => {
      const res = await http(method, path, { body: method === 'GET' ? undefined : {} });
      expectError(res, 405);
      expect(res.headers.get('allow')?.split(/,\s*/).sort()).to.deep.equal(allow.split(', ').sort());
    });
  }

  it('when POST /openapi.json is requested, then 405 with Allow: GET', async () => {
    const res = await http('POST', '/openapi.json', { body: {} });
    expectError(res, 405);
    expect(res.headers.get('allow')).to.equal('GET');
  });

  it('when unknown query parameters are sent, then they are ignored', async () => {
    const tenant = uniqueTenant();
    const user = await createUser(tenant);
    const headers = adminOf(tenant);
    expect(expectSuccess(await http('GET', '/api/v1/users?foo=1&page=1&debug', { headers }))).to.deep.equal([
      user,
    ]);
    expect(
      expectSuccess(await http('GET', `/api/v1/users/${user.id}?expand=all`, { headers })),
    ).to.deep.equal(user);
    expect((await http('DELETE', `/api/v1/users/${user.id}?force=1`, { headers })).status).to.equal(204);
  });
});

describe('errors: headers and health', () => {
  it('when X-Request-Id is sent, then it is echoed on REST, tRPC and errors; when absent, one is generated', async () => {
    const headers = { ...adminOf(uniqueTenant()), 'X-Request-Id': 'req-abc_123.4:5' };
    for (const res of [
      await http('GET', '/api/v1/users', { headers }),
      await http('GET', '/no/such/path', { headers }),
      await trpcQuery('users.list', {}, headers),
      await http('GET', '/healthz', { headers }),
    ]) {
      expect(res.headers.get('x-request-id')).to.equal('req-abc_123.4:5');
    }
    const a = (await http('GET', '/healthz')).headers.get('x-request-id');
    const b = (await http('GET', '/api/v1/users')).headers.get('x-request-id');
    expect(a).to.match(/^[A-Za-z0-9._:-]{8,}$/);
    expect(b).to.match(/^[A-Za-z0-9._:-]{8,}$/);
    expect(a).to.not.equal(b);
  });

  it('when X-Request-Id is not a safe token, then a generated one replaces it', async () => {
    const res = await http('GET', '/healthz', { headers: { 'X-Request-Id': 'evil id\twith spaces' } });
    expect(res.headers.get('x-request-id')).to.match(/^[A-Za-z0-9._:-]{8,}$/);
  });

  for (const path of ['/healthz', '/readyz']) {
    it(`when ${path} is requested without a token, then 200 envelope {status: "ok"}`, async () => {
      const res = await http('GET', path);
      expect(expectSuccess(res)).to.deep.equal({ status: 'ok' });
    });
  }
});

describe('errors: precedence (404/405, 401, 400, 403/404, 409)', () => {
  it('when there is no token, then 401 wins over a bad body and a bad path id, but not over 404 and 405', async () => {
    expectError(await http('POST', '/api/v1/users', { body: { name: '', age: -1, extra: 1 } }), 401);
    expectError(await http('GET', '/api/v1/users/abc'), 401);
    expectError(await http('PATCH', '/api/v1/users/abc', { body: {} }), 401);
    expectError(await http('GET', '/api/v1/nothing'), 404);
    expectError(await http('DELETE', '/api/v1/users'), 405);
  });

  it('when a DISABLED user sends a bad body, then 403 (with 401) wins over 400', async () => {
    const tenant = uniqueTenant();
    const user = await createUser(tenant, { status: 'DISABLED' });
    const res = await http('PATCH', `/api/v1/users/${user.id}`, {
      headers: bearer(tenant, user.id),
      body: {},
    });
    expectError(res, 403);
  });

  it('when a stranger sends a bad body to a user it may not touch, then 400 wins over 403 and 404', async () => {
    const tenant = uniqueTenant();
    const [user, other] = [await createUser(tenant), await createUser(tenant)];
    const headers = bearer(tenant, other.id, 'user');
    expectError(await http('PATCH', `/api/v1/users/${user.id}`, { headers, body: { role: 'admin' } }), 400);
    const foreign = adminOf(uniqueTenant());
    expectError(
      await http('PATCH', `/api/v1/users/${user.id}`, { headers: foreign, body: { age: -1 } }),
      400,
    );
  });

  it('when a non-admin sends an invalid body to an admin-only operation, then 400 wins over 403', async () => {
    const tenant = uniqueTenant();
    const headers = bearer(tenant, '900000003', 'user');
    expectError(await http('POST', '/api/v1/users', { headers, body: { name: '' } }), 400);
  });

  it('when a duplicate username comes with an invalid field, then 400 wins over 409', async () => {
    const tenant = uniqueTenant();
    const username = uniqueUsername();
    await createUser(tenant, { username });
    const res = await http('POST', '/api/v1/users', {
      headers: adminOf(tenant),
      body: { name: 'B', age: 999, username },
    });
    expectError(res, 400);
  });
});

import { TRPCError } from '@trpc/server';
import { expect } from 'chai';
import jwt from 'jsonwebtoken';
import { type HttpResult, http } from '../support/http.js';
import { callerFor, TEST_ENV } from '../support/server.js';
import { bearer, rawToken, tokenFor, uniqueTenant, unsignedToken } from '../support/tokens.js';
import { trpcMutation, trpcQuery } from '../support/trpc-http.js';
import { adminOf, createUser, expectError, expectSuccess, OPERATOR_ID, userRow } from '../support/users.js';

const now = () => Math.floor(Date.now() / 1000);
const claims = (tid: string, extra: Record<string, unknown> = {}) => ({
  sub: OPERATOR_ID,
  tid,
  role: 'admin',
  exp: now() + 600,
  ...extra,
});

/** Authorization header values that must all be refused with 401, built for a tenant `t`. */
const REFUSED: Array<[string, (t: string) => string | undefined]> = [
  ['no header', () => undefined],
  ['another scheme', () => `Basic ${Buffer.from('admin:secret').toString('base64')}`],
  ['"Bearer" alone', () => 'Bearer'],
  ['"Bearer " and nothing', () => 'Bearer '],
  ['two tokens', (t) => `Bearer ${tokenFor(t, OPERATOR_ID, 'admin')} ${tokenFor(t, OPERATOR_ID, 'admin')}`],
  ['a token without the scheme', (t) => tokenFor(t, OPERATOR_ID, 'admin')],
  ['garbage', () => 'Bearer not-a-jwt'],
  ['an expired token', (t) => `Bearer ${rawToken(claims(t, { exp: now() - 60 }))}`],
  ['a wrong signature', (t) => `Bearer ${rawToken(claims(t), 'another-secret-0123456789abcdef')}`],
  ['a tampered payload', (t) => `Bearer ${tampered(t)}`],
  ['alg none', (t) => `Bearer ${unsignedToken(claims(t))}`],
  ['alg HS512', (t) => `Bearer ${rawToken(claims(t), TEST_ENV.JWT_SECRET, { algorithm: 'HS512' })}`],
  ['no exp', (t) => `Bearer ${rawToken({ sub: OPERATOR_ID, tid: t, role: 'admin' })}`],
  // A string payload is signed as is (jsonwebtoken refuses to sign an object with a non-numeric exp).
  [
    'a non-numeric exp',
    (t) => `Bearer ${jwt.sign(JSON.stringify(claims(t, { exp: 'tomorrow' })), TEST_ENV.JWT_SECRET)}`,
  ],
  ['a tid with a space', () => `Bearer ${rawToken(claims('bad tenant'))}`],
  ['a tid of 37 chars', () => `Bearer ${rawToken(claims('a'.repeat(37)))}`],
  ['no tid', (t) => `Bearer ${rawToken(claims(t, { tid: undefined }))}`],
  ['a sub "abc"', (t) => `Bearer ${rawToken(claims(t, { sub: 'abc' }))}`],
  ['a sub "0"', (t) => `Bearer ${rawToken(claims(t, { sub: '0' }))}`],
  ['a sub "01"', (t) => `Bearer ${rawToken(claims(t, { sub: '01' }))}`],
  ['a numeric sub', (t) => `Bearer ${rawToken(claims(t, { sub: 5 }))}`],
  ['a sub above 2^63-1', (t) => `Bearer ${rawToken(claims(t, { sub: '9999999999999999999' }))}`],
  ['a role "root"', (t) => `Bearer ${rawToken(claims(t, { role: 'root' }))}`],
];

/** A validly signed admin token whose payload was swapped for another (signature no longer matches). */
function tampered(t: string): string {
  const [head, , sig] = tokenFor(t, OPERATOR_ID, 'user').split('.');
  const payload = Buffer.from(JSON.stringify(claims(t, { role: 'admin' }))).toString('base64url');
  return `${head}.${payload}.${sig}`;
}

function expect401(res: HttpResult) {
  expect(res.status, res.text).to.equal(401);
  expect(res.headers.get('www-authenticate')).to.equal('Bearer');
}

describe('auth: bearer tokens refused with 401', () => {
  for (const [label, make] of REFUSED) {
    const headersFor = (t: string): Record<string, string> => {
      const value = make(t);
      return value === undefined ? {} : { Authorization: value };
    };

    it(`when REST gets ${label}, then 401 envelope with WWW-Authenticate: Bearer`, async () => {
      const t = uniqueTenant();
      const headers = headersFor(t);
      for (const res of [
        await http('GET', '/api/v1/users', { headers }),
        await http('POST', '/api/v1/users', { headers, body: { name: 'Ann', age: 30 } }),
        await http('POST', '/api/users', { headers, body: { name: 'Ann', age: 30 } }),
        await http('DELETE', '/api/users/1', { headers }),
        await http('PUT', '/users/1/status', { headers, body: { status: 'DISABLED' } }),
      ]) {
        expect401(res);
        expectError(res, 401);
      }
      const list = expectSuccess(await http('GET', '/api/v1/users', { headers: adminOf(t) }));
      expect(list).to.deep.equal([]);
    });

    it(`when tRPC gets ${label}, then a 401 UNAUTHORIZED error with WWW-Authenticate: Bearer`, async () => {
      const headers = headersFor(uniqueTenant());
      const res = await trpcQuery('users.list', {}, headers);
      expect401(res);
      expect(res.body.error.data).to.include({ code: 'UNAUTHORIZED', httpStatus: 401, businessCode: 401 });
      const { caller } = await callerFor(headers);
      const err = await caller.users.list({}).catch((e: unknown) => e);
      expect(err).to.be.instanceOf(TRPCError);
      expect((err as TRPCError).code).to.equal('UNAUTHORIZED');
    });
  }
});

describe('auth: roles, operator tokens and user rows', () => {
  it('when a user-role token calls each admin-only operation, then 403 on REST and tRPC and nothing changes', async () => {
    const tenant = uniqueTenant();
    const target = await createUser(tenant);
    const member = await createUser(tenant);
    for (const headers of [bearer(tenant, member.id, 'user'), bearer(tenant, OPERATOR_ID, 'user')]) {
      const body = { name: 'X', age: 1, username: null, email: null };
      const rest = [
        await http('GET', '/api/v1/users', { headers }),
        await http('GET', '/api/v2/users', { headers }),
        await http('POST', '/api/v1/users', { headers, body: { name: 'X', age: 1 } }),
        await http('PUT', `/api/v1/users/${target.id}`, { headers, body }),
        await http('PUT', `/api/v1/users/${target.id}/status`, { headers, body: { status: 'DISABLED' } }),
        await http('DELETE', `/api/v1/users/${target.id}`, { headers }),
        await http('GET', '/api/users', { headers }),
        await http('POST', '/api/users', { headers, body: { name: 'X', age: 1 } }),
        await http('PUT', `/users/${target.id}/status`, { headers, body: { status: 'DISABLED' } }),
        await http('DELETE', `/api/users/${target.id}`, { headers }),
      ];
      for (const res of rest) expectError(res, 403);
      const trpc = [
        await trpcQuery('users.list', {}, headers),
        await trpcQuery('users.listPage', {}, headers),
        await trpcMutation('users.create', { name: 'X', age: 1 }, headers),
        await trpcMutation('users.replace', { id: target.id, ...body }, headers),
        await trpcMutation('users.setStatus', { id: target.id, status: 'DISABLED' }, headers),
        await trpcMutation('users.delete', { id: target.id }, headers),
      ];
      for (const res of trpc) {
        expect(res.status, res.text).to.equal(403);
        expect(res.body.error.data).to.include({ code: 'FORBIDDEN', httpStatus: 403, businessCode: 403 });
      }
    }
    expect(await userRow(target.id)).to.include({ name: 'Test User', status: 'ACTIVE' });
    const list = expectSuccess(await http('GET', '/api/v1/users', { headers: adminOf(tenant) }));
    expect(list).to.have.length(2);
  });

  it('when the scheme is written in another case (bearer, BEARER), then the token is accepted on REST and tRPC (RFC 9110: schemes are case-insensitive)', async () => {
    const tenant = uniqueTenant();
    for (const scheme of ['bearer', 'BEARER', 'bEaReR']) {
      const headers = { Authorization: `${scheme} ${tokenFor(tenant, OPERATOR_ID, 'admin')}` };
      expect(expectSuccess(await http('GET', '/api/v1/users', { headers }))).to.deep.equal([]);
      expect((await trpcQuery('users.list', {}, headers)).status).to.equal(200);
    }
  });

  it('when a valid admin token names a sub without a user row, then it is accepted and no row is created', async () => {
    const tenant = uniqueTenant();
    const sub = '900000777';
    const headers = bearer(tenant, sub, 'admin');
    expect(expectSuccess(await http('GET', '/api/v1/users', { headers }))).to.deep.equal([]);
    const res = await trpcQuery('users.listPage', {}, headers);
    expect(res.status).to.equal(200);
    expect(res.body.result.data.data).to.deep.equal({ items: [], page: 1, size: 10, total: 0 });
    expect(await userRow(sub)).to.equal(undefined);
  });

  it("when the user row's role is 'user' but the token claims admin, then the row wins: 403", async () => {
    const tenant = uniqueTenant();
    const demoted = await createUser(tenant, { role: 'user' });
    const headers = bearer(tenant, demoted.id, 'admin');
    expectError(await http('GET', '/api/v1/users', { headers }), 403);
    expectError(await http('POST', '/api/v1/users', { headers, body: { name: 'X', age: 1 } }), 403);
    expect((await trpcQuery('users.list', {}, headers)).status).to.equal(403);
    const self = expectSuccess(await http('GET', `/api/v1/users/${demoted.id}`, { headers }));
    expect(self.role).to.equal('user');
  });

  it('when the same sub exists only in another tenant, then the token is an operator token of its own tenant', async () => {
    const other = uniqueTenant();
    const row = await createUser(other, { role: 'user' });
    const tenant = uniqueTenant();
    const headers = bearer(tenant, row.id, 'admin');
    expect(expectSuccess(await http('GET', '/api/v1/users', { headers }))).to.deep.equal([]);
    expectError(await http('GET', `/api/v1/users/${row.id}`, { headers }), 404);
  });

  it('when the user row is DISABLED, then its token gets 403 on REST and tRPC, even claiming admin', async () => {
    const tenant = uniqueTenant();
    const user = await createUser(tenant, { role: 'admin', status: 'DISABLED' });
    const headers = bearer(tenant, user.id, 'admin');
    expectError(await http('GET', '/api/v1/users', { headers }), 403);
    expectError(await http('GET', `/api/v1/users/${user.id}`, { headers }), 403);
    const res = await trpcQuery('users.get', { id: user.id }, headers);
    expect(res.status).to.equal(403);
    expect(res.body.error.data.businessCode).to.equal(403);
  });
});

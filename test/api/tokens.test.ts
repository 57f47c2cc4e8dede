import { spawn } from 'node:child_process';
import { expect } from 'chai';
import jwt from 'jsonwebtoken';
import { type HttpResult, http } from '../support/http.js';
import { TEST_ENV } from '../support/server.js';
import { uniqueTenant } from '../support/tokens.js';
import {
  adminOf,
  createUser,
  expectError,
  expectSuccess,
  uniqueUsername,
  userRow,
} from '../support/users.js';

const PASSWORD = 'correct-horse-battery';

async function userWithPassword(tenant: string, fields: Record<string, unknown> = {}) {
  const username = uniqueUsername();
  const user = await createUser(tenant, { username, password: PASSWORD, ...fields });
  return { user, username };
}

const login = (body: Record<string, unknown>) => http('POST', '/api/v1/tokens', { body });
const withToken = (token: string) => ({ Authorization: `Bearer ${token}` });

/** No body may carry the password, its hash or its salt, nor any key that names them. */
async function expectNoSecrets(id: string, ...responses: HttpResult[]) {
  const row = await userRow(id);
  const secrets = [PASSWORD, String(row?.password_hash), String(row?.password_salt)];
  for (const res of responses) {
    for (const secret of secrets) expect(res.text).to.not.include(secret);
    expect(res.text).to.not.match(/password|salt|hash/i);
  }
}

function runTokenCli(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'server/token-cli.ts', ...args], {
      env: { PATH: process.env.PATH, ...TEST_ENV },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => {
      stdout += d;
    });
    child.stderr.on('data', (d) => {
      stderr += d;
    });
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

describe('tokens: log in (POST /api/v1/tokens)', () => {
  it('when the credentials are right, then 201 {token, tokenType, expiresAt} without Location, and the token works', async () => {
    const tenant = uniqueTenant();
    const { user, username } = await userWithPassword(tenant);
    const res = await login({ tenantId: tenant, username, password: PASSWORD });
    const data = expectSuccess(res, 201);
    expect(data).to.have.all.keys('token', 'tokenType', 'expiresAt');
    expect(data.tokenType).to.equal('Bearer');
    expect(res.headers.get('location')).to.equal(null);
    expect(data.expiresAt).to.match(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/);
    expect(Date.parse(data.expiresAt)).to.be.greaterThan(Date.now());
    const claims = jwt.verify(data.token, TEST_ENV.JWT_SECRET, { algorithms: ['HS256'] }) as jwt.JwtPayload;
    expect(claims).to.include({ sub: user.id, tid: tenant, role: 'user' });
    expect(claims.exp).to.equal(Date.parse(data.expiresAt) / 1000);
    const me = await http('GET', `/api/v1/users/${user.id}`, { headers: withToken(data.token) });
    expect(expectSuccess(me)).to.deep.equal(user);
  });

  it("when an admin logs in, then the token carries the row's role and opens admin-only paths", async () => {
    const tenant = uniqueTenant();
    const { user, username } = await userWithPassword(tenant, { role: 'admin' });
    const { token } = expectSuccess(await login({ tenantId: tenant, username, password: PASSWORD }), 201);
    const list = expectSuccess(await http('GET', '/api/v1/users', { headers: withToken(token) }));
    expect(list.map((u: { id: string }) => u.id)).to.deep.equal([user.id]);
  });

  it('when the password, the user, the tenant or the stored password is wrong, then 401 with one message', async () => {
    const tenant = uniqueTenant();
    const { username } = await userWithPassword(tenant);
    const passwordless = await createUser(tenant, { username: uniqueUsername() });
    const attempts = [
      { tenantId: tenant, username, password: 'wrong-password' },
      { tenantId: tenant, username: uniqueUsername(), password: PASSWORD },
      { tenantId: uniqueTenant(), username, password: PASSWORD },
      { tenantId: tenant, username: passwordless.username, password: PASSWORD },
    ];
    const messages = new Set<string>();
    for (const body of attempts) {
      const res = await login(body);
      expectError(res, 401);
      expect(res.headers.get('www-authenticate')).to.equal('Bearer');
      messages.add(res.body.message);
    }
    expect([...messages]).to.have.length(1);
  });

  it('when the user is DISABLED, then login is 401 and its earlier token gets 403', async () => {
    const tenant = uniqueTenant();
    const { user, username } = await userWithPassword(tenant);
    const before = expectSuccess(await login({ tenantId: tenant, username, password: PASSWORD }), 201);
    const disable = await http('PUT', `/api/v1/users/${user.id}/status`, {
      headers: adminOf(tenant),
      body: { status: 'DISABLED' },
    });
    expectSuccess(disable);
    const after = await login({ tenantId: tenant, username, password: PASSWORD });
    expectError(after, 401);
    expect(after.body.message).to.equal(
      (await login({ tenantId: tenant, username, password: 'wrong-password' })).body.message,
    );
    expectError(await http('GET', `/api/v1/users/${user.id}`, { headers: withToken(before.token) }), 403);
    const patch = await http('PATCH', `/api/v1/users/${user.id}`, {
      headers: withToken(before.token),
      body: { name: 'Still here' },
    });
    expectError(patch, 403);
    expect((await userRow(user.id))?.name).to.equal('Test User');
  });

  for (const [label, body, field] of [
    ['no password', { username: 'someone' }, 'password'],
    ['a bad tenant id', { tenantId: 'bad tenant!', username: 'someone', password: PASSWORD }, 'tenantId'],
    ['an unknown field', { username: 'someone', password: PASSWORD, role: 'admin' }, ''],
  ] as const) {
    it(`when the body has ${label}, then 400`, async () => {
      const res = await login({ tenantId: uniqueTenant(), ...body });
      expectError(res, 400);
      if (field) expect(res.body.message).to.match(new RegExp(`^${field}: `));
    });
  }

  it('when users are created, read, listed and logged in, then no body carries the password, hash or salt', async () => {
    const tenant = uniqueTenant();
    const username = uniqueUsername();
    const created = await http('POST', '/api/v1/users', {
      headers: adminOf(tenant),
      body: { name: 'Ann', age: 30, username, password: PASSWORD },
    });
    const id = expectSuccess(created, 201).id;
    const row = await userRow(id);
    expect(row?.password_hash).to.be.a('string');
    expect(row?.password_salt).to.be.a('string');
    const responses = [
      created,
      await http('GET', `/api/v1/users/${id}`, { headers: adminOf(tenant) }),
      await http('GET', '/api/v1/users', { headers: adminOf(tenant) }),
      await http('GET', '/api/v2/users', { headers: adminOf(tenant) }),
      await http('PATCH', `/api/v1/users/${id}`, { headers: adminOf(tenant), body: { age: 31 } }),
      await login({ tenantId: tenant, username, password: PASSWORD }),
      await login({ tenantId: tenant, username, password: 'wrong-password' }),
    ];
    await expectNoSecrets(id, ...responses);
  });
});

describe('tokens: operator CLI (npm run token)', () => {
  it('when run with --tenant, --user and --role admin, then it prints a token the server accepts', async () => {
    const tenant = uniqueTenant();
    const user = await createUser(tenant);
    const out = await runTokenCli(['--tenant', tenant, '--user', '900000123', '--role', 'admin']);
    expect(out.code, out.stderr).to.equal(0);
    const token = out.stdout.trim();
    expect(token).to.match(/^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/);
    const claims = jwt.decode(token) as jwt.JwtPayload;
    expect(claims).to.include({ sub: '900000123', tid: tenant, role: 'admin' });
    expect(await userRow('900000123')).to.equal(undefined);
    const list = expectSuccess(await http('GET', '/api/v1/users', { headers: withToken(token) }));
    expect(list.map((u: { id: string }) => u.id)).to.deep.equal([user.id]);
  });

  for (const [label, args, mention] of [
    ['no --tenant', ['--user', '1', '--role', 'admin'], '--tenant'],
    ['a bad --user', ['--tenant', 't1', '--user', 'abc', '--role', 'admin'], '--user'],
    ['a bad --role', ['--tenant', 't1', '--user', '1', '--role', 'root'], '--role'],
    ['an unknown option', ['--tenant', 't1', '--user', '1', '--bogus', 'x'], 'bogus'],
  ] as const) {
    it(`when run with ${label}, then it exits non-zero, prints no token and names the problem`, async () => {
      const out = await runTokenCli([...args]);
      expect(out.code).to.not.equal(0);
      expect(out.stdout).to.equal('');
      expect(out.stderr).to.include(mention);
    });
  }
});

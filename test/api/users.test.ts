import { expect } from 'chai';
import { http } from '../support/http.js';
import { bearer, uniqueTenant } from '../support/tokens.js';
import {
  adminOf,
  createUser,
  expectError,
  expectSuccess,
  type UserBody,
  uniqueUsername,
  userRow,
} from '../support/users.js';

const ISO_UTC = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/;
const selfOf = (tenant: string, user: UserBody) => bearer(tenant, user.id, 'user');

async function createMany(tenant: string, n: number): Promise<UserBody[]> {
  const users: UserBody[] = [];
  for (let i = 0; i < n; i++) users.push(await createUser(tenant, { name: `User ${i}` }));
  return users;
}

describe('users: list v1 (GET /api/v1/users, alias /api/users)', () => {
  for (const path of ['/api/v1/users', '/api/users']) {
    it(`when an admin lists ${path} without a query, then 200 and the tenant's first 10 users as an array`, async () => {
      const tenant = uniqueTenant();
      const users = await createMany(tenant, 12);
      await createUser(uniqueTenant());
      const data = expectSuccess(await http('GET', path, { headers: adminOf(tenant) }));
      expect(data).to.be.an('array');
      expect(data.map((u: UserBody) => u.id)).to.deep.equal(users.slice(0, 10).map((u) => u.id));
      expect(data[0]).to.deep.equal(users[0]);
    });
  }

  it('when page and size are given, then that slice is returned and size 100 is allowed', async () => {
    const tenant = uniqueTenant();
    const users = await createMany(tenant, 5);
    const page2 = expectSuccess(
      await http('GET', '/api/v1/users?page=2&size=2', { headers: adminOf(tenant) }),
    );
    expect(page2.map((u: UserBody) => u.id)).to.deep.equal([users[2].id, users[3].id]);
    const all = expectSuccess(await http('GET', '/api/v1/users?size=100', { headers: adminOf(tenant) }));
    expect(all).to.have.length(5);
    const past = expectSuccess(await http('GET', '/api/v1/users?page=9', { headers: adminOf(tenant) }));
    expect(past).to.deep.equal([]);
  });

  for (const query of ['page=0', 'page=-1', 'page=abc', 'page=1.5', 'size=0', 'size=101', 'size=x']) {
    it(`when the query is ${query}, then 400 naming the parameter`, async () => {
      const res = await http('GET', `/api/v1/users?${query}`, { headers: adminOf(uniqueTenant()) });
      expectError(res, 400);
      expect(res.body.message).to.match(new RegExp(`^${query.split('=')[0]}: `));
    });
  }
});

describe('users: list v2 (GET /api/v2/users)', () => {
  it('when an admin lists, then 200 and {items, page, size, total} with defaults 1 and 10', async () => {
    const tenant = uniqueTenant();
    const users = await createMany(tenant, 3);
    const data = expectSuccess(await http('GET', '/api/v2/users', { headers: adminOf(tenant) }));
    expect(data).to.deep.equal({ items: users, page: 1, size: 10, total: 3 });
    const second = expectSuccess(
      await http('GET', '/api/v2/users?page=2&size=2', { headers: adminOf(tenant) }),
    );
    expect(second).to.deep.equal({ items: [users[2]], page: 2, size: 2, total: 3 });
  });

  it('when size is 101, then 400', async () => {
    expectError(await http('GET', '/api/v2/users?size=101', { headers: adminOf(uniqueTenant()) }), 400);
  });
});

describe('users: get one (GET /api/v1/users/{id}, alias /api/users/{id})', () => {
  for (const path of ['/api/v1/users', '/api/users']) {
    it(`when an admin or the user itself reads ${path}/{id}, then 200 and the User`, async () => {
      const tenant = uniqueTenant();
      const user = await createUser(tenant, { username: uniqueUsername() });
      expect(
        expectSuccess(await http('GET', `${path}/${user.id}`, { headers: adminOf(tenant) })),
      ).to.deep.equal(user);
      const self = expectSuccess(await http('GET', `${path}/${user.id}`, { headers: selfOf(tenant, user) }));
      expect(self).to.deep.equal(user);
    });
  }

  it('when another user of the same tenant reads it, then 403; another tenant or a missing id, then 404', async () => {
    const tenant = uniqueTenant();
    const [user, other] = await createMany(tenant, 2);
    expectError(await http('GET', `/api/v1/users/${user.id}`, { headers: selfOf(tenant, other) }), 403);
    expectError(await http('GET', `/api/v1/users/${user.id}`, { headers: adminOf(uniqueTenant()) }), 404);
    expectError(await http('GET', '/api/v1/users/9000000000000000000', { headers: adminOf(tenant) }), 404);
  });
});

describe('users: create (POST /api/v1/users, alias /api/users)', () => {
  for (const path of ['/api/v1/users', '/api/users']) {
    it(`when an admin posts to ${path}, then 201, canonical Location, defaults user/ACTIVE, and the row exists`, async () => {
      const tenant = uniqueTenant();
      const res = await http('POST', path, { headers: adminOf(tenant), body: { name: 'Ann', age: 30 } });
      const user = expectSuccess(res, 201);
      expect(user).to.have.all.keys(
        'id',
        'name',
        'age',
        'username',
        'email',
        'role',
        'status',
        'createdAt',
        'updatedAt',
      );
      expect(user).to.include({
        name: 'Ann',
        age: 30,
        username: null,
        email: null,
        role: 'user',
        status: 'ACTIVE',
      });
      expect(user.id).to.match(/^[1-9][0-9]*$/);
      expect(user.createdAt).to.match(ISO_UTC);
      expect(res.headers.get('location')).to.equal(`/api/v1/users/${user.id}`);
      const row = await userRow(user.id);
      expect(row).to.include({ tenant_id: tenant, name: 'Ann', age: 30, role: 'user', status: 'ACTIVE' });
    });
  }

  it('when role and a password are given, then they are stored and the password only as a hash', async () => {
    const tenant = uniqueTenant();
    const user = await createUser(tenant, {
      role: 'admin',
      username: uniqueUsername(),
      password: 'correct-horse',
    });
    expect(user.role).to.equal('admin');
    const row = await userRow(user.id);
    expect(row?.role).to.equal('admin');
    expect(row?.password_hash).to.be.a('string').and.not.include('correct-horse');
  });

  it('when a username or email is taken in the tenant, then 409 code 40904; another tenant may reuse them', async () => {
    const tenant = uniqueTenant();
    const username = uniqueUsername();
    const email = `${uniqueUsername()}@example.com`;
    await createUser(tenant, { username, email });
    for (const fields of [{ username }, { email }, { email: email.toUpperCase() }]) {
      const res = await http('POST', '/api/v1/users', {
        headers: adminOf(tenant),
        body: { name: 'B', age: 1, ...fields },
      });
      expectError(res, 409, 40904);
      expect(res.body.message).to.match(new RegExp(`^${Object.keys(fields)[0]}: `));
    }
    const list = expectSuccess(await http('GET', '/api/v1/users', { headers: adminOf(tenant) }));
    expect(list).to.have.length(1);
    const elsewhere = await createUser(uniqueTenant(), { username, email });
    expect(elsewhere).to.include({ username, email });
  });
});

describe('users: replace (PUT /api/v1/users/{id})', () => {
  it('when an admin replaces a user, then 200, every field replaced and null clears username and email', async () => {
    const tenant = uniqueTenant();
    const user = await createUser(tenant, {
      username: uniqueUsername(),
      email: `${uniqueUsername()}@example.com`,
    });
    const body = { name: 'New', age: 44, username: null, email: null };
    const data = expectSuccess(
      await http('PUT', `/api/v1/users/${user.id}`, { headers: adminOf(tenant), body }),
    );
    expect(data).to.include({
      id: user.id,
      ...body,
      role: 'user',
      status: 'ACTIVE',
      createdAt: user.createdAt,
    });
    expect(await userRow(user.id)).to.include({ name: 'New', age: 44, username: null, email: null });
  });

  it('when the username belongs to another user, then 409 code 40904; another tenant or no row, then 404', async () => {
    const tenant = uniqueTenant();
    const taken = uniqueUsername();
    await createUser(tenant, { username: taken });
    const user = await createUser(tenant);
    const body = { name: 'N', age: 1, username: taken, email: null };
    expectError(
      await http('PUT', `/api/v1/users/${user.id}`, { headers: adminOf(tenant), body }),
      409,
      40904,
    );
    expectError(
      await http('PUT', `/api/v1/users/${user.id}`, { headers: adminOf(uniqueTenant()), body }),
      404,
    );
    expectError(
      await http('PUT', '/api/v1/users/9000000000000000000', { headers: adminOf(tenant), body }),
      404,
    );
    expectError(await http('PUT', `/api/v1/users/${user.id}`, { headers: selfOf(tenant, user), body }), 403);
  });
});

describe('users: update (PATCH /api/v1/users/{id})', () => {
  it('when some fields are sent, then 200 and the fields not sent are unchanged', async () => {
    const tenant = uniqueTenant();
    const email = `${uniqueUsername()}@example.com`;
    const user = await createUser(tenant, { username: uniqueUsername(), email });
    const data = expectSuccess(
      await http('PATCH', `/api/v1/users/${user.id}`, { headers: adminOf(tenant), body: { age: 31 } }),
    );
    expect(data).to.deep.include({ ...user, age: 31, updatedAt: data.updatedAt });
    expect(await userRow(user.id)).to.include({ name: 'Test User', age: 31, username: user.username, email });
  });

  it('when the user itself patches itself, then 200; when it patches another user, then 403 and no change', async () => {
    const tenant = uniqueTenant();
    const [user, other] = await createMany(tenant, 2);
    const headers = selfOf(tenant, user);
    const data = expectSuccess(
      await http('PATCH', `/api/v1/users/${user.id}`, { headers, body: { name: 'Me' } }),
    );
    expect(data.name).to.equal('Me');
    expectError(await http('PATCH', `/api/v1/users/${other.id}`, { headers, body: { name: 'Hacked' } }), 403);
    expect((await userRow(other.id))?.name).to.equal('User 1');
  });
});

describe('users: status (PUT /api/v1/users/{id}/status, alias /users/{id}/status)', () => {
  for (const path of ['/api/v1/users', '/users']) {
    it(`when an admin sets DISABLED twice on ${path}/{id}/status, then both answer 200 DISABLED`, async () => {
      const tenant = uniqueTenant();
      const user = await createUser(tenant);
      const url = `${path}/${user.id}/status`;
      const first = expectSuccess(
        await http('PUT', url, { headers: adminOf(tenant), body: { status: 'DISABLED' } }),
      );
      const second = expectSuccess(
        await http('PUT', url, { headers: adminOf(tenant), body: { status: 'DISABLED' } }),
      );
      expect(first).to.deep.equal({ ...user, status: 'DISABLED', updatedAt: first.updatedAt });
      expect(second).to.deep.equal(first);
      expect((await userRow(user.id))?.status).to.equal('DISABLED');
    });
  }

  it('when the status is unknown, then 400; when the caller is not an admin, then 403', async () => {
    const tenant = uniqueTenant();
    const user = await createUser(tenant);
    const url = `/api/v1/users/${user.id}/status`;
    expectError(await http('PUT', url, { headers: adminOf(tenant), body: { status: 'disabled' } }), 400);
    expectError(await http('PUT', url, { headers: selfOf(tenant, user), body: { status: 'DISABLED' } }), 403);
    expect((await userRow(user.id))?.status).to.equal('ACTIVE');
  });
});

describe('users: delete (DELETE /api/v1/users/{id}, alias /api/users/{id})', () => {
  for (const path of ['/api/v1/users', '/api/users']) {
    it(`when an admin deletes ${path}/{id}, then 204 without a body, the row is gone, GET and a second DELETE 404`, async () => {
      const tenant = uniqueTenant();
      const user = await createUser(tenant);
      const res = await http('DELETE', `${path}/${user.id}`, { headers: adminOf(tenant) });
      expect(res.status).to.equal(204);
      expect(res.text).to.equal('');
      expect(res.headers.get('content-type')).to.equal(null);
      expect(await userRow(user.id)).to.equal(undefined);
      expectError(await http('GET', `${path}/${user.id}`, { headers: adminOf(tenant) }), 404);
      expectError(await http('DELETE', `${path}/${user.id}`, { headers: adminOf(tenant) }), 404);
    });
  }

  it('when another tenant or a non-admin deletes, then 404 or 403 and the row stays', async () => {
    const tenant = uniqueTenant();
    const user = await createUser(tenant);
    expectError(await http('DELETE', `/api/v1/users/${user.id}`, { headers: adminOf(uniqueTenant()) }), 404);
    expectError(await http('DELETE', `/api/v1/users/${user.id}`, { headers: selfOf(tenant, user) }), 403);
    expect(await userRow(user.id)).to.not.equal(undefined);
  });
});

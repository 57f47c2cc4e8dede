import { expect } from 'chai';
import { http } from '../support/http.js';
import { bearer, uniqueTenant } from '../support/tokens.js';

describe('smoke: users over REST', () => {
  it('when an admin creates, reads, patches and deletes a user, then each answer follows the contract', async () => {
    const tenant = uniqueTenant();
    const admin = bearer(tenant, '900000001', 'admin');
    const created = await http('POST', '/api/v1/users', {
      headers: admin,
      body: { name: 'Ann', age: 30, email: 'ann@example.com' },
    });
    expect(created.status).to.equal(201);
    expect(created.body.code).to.equal(200);
    const id = created.body.data.id;
    expect(created.headers.get('location')).to.equal(`/api/v1/users/${id}`);
    const got = await http('GET', `/api/users/${id}`, { headers: admin });
    expect(got.status).to.equal(200);
    expect(got.body.data.email).to.equal('ann@example.com');
    const patched = await http('PATCH', `/api/v1/users/${id}`, { headers: admin, body: { age: 31 } });
    expect(patched.body.data.age).to.equal(31);
    const bad = await http('PATCH', `/api/v1/users/${id}`, { headers: admin, body: { role: 'admin' } });
    expect(bad.status).to.equal(400);
    expect(bad.body).to.deep.equal({ code: 400, message: bad.body.message, data: null });
    const del = await http('DELETE', `/api/v1/users/${id}`, { headers: admin });
    expect(del.status).to.equal(204);
    expect(del.text).to.equal('');
    const gone = await http('GET', `/api/v1/users/${id}`, { headers: admin });
    expect(gone.status).to.equal(404);
    const m = await http('PATCH', '/api/users', { headers: admin, body: {} });
    expect(m.status).to.equal(405);
    expect(m.headers.get('allow')).to.equal('GET, POST');
  });
});

import { expect } from 'chai';
import { http } from '../support/http.js';
import { bearer, idempotencyKey, uniqueTenant } from '../support/tokens.js';

describe('idempotency on users (Mode A)', () => {
  it('when a user create is retried with the same key, then one row and the same answer replayed', async () => {
    const tenant = uniqueTenant();
    const headers = { ...bearer(tenant, '900000001', 'admin'), 'Idempotency-Key': idempotencyKey() };
    const body = { name: 'Ann', age: 30, username: 'ann_1' };
    const first = await http('POST', '/api/v1/users', { headers, body });
    const second = await http('POST', '/api/users', {
      headers,
      body: { age: 30, username: 'ann_1', name: 'Ann' },
    });
    expect(first.status).to.equal(201);
    expect(second.status).to.equal(201);
    expect(second.headers.get('idempotent-replayed')).to.equal('true');
    expect(first.headers.get('idempotent-replayed')).to.equal(null);
    expect(second.body).to.deep.equal(first.body);
    expect(second.headers.get('location')).to.equal(first.headers.get('location'));
    const list = await http('GET', '/api/v2/users', { headers: bearer(tenant, '900000001', 'admin') });
    expect(list.body.data.total).to.equal(1);
    const other = await http('POST', '/api/v1/users', { headers, body: { ...body, age: 31 } });
    expect(other.status).to.equal(409);
    expect(other.body.code).to.equal(40901);
  });

  it('when a create fails finally (409 unique) and is retried, then the failure is replayed', async () => {
    const tenant = uniqueTenant();
    const admin = bearer(tenant, '900000001', 'admin');
    await http('POST', '/api/v1/users', { headers: admin, body: { name: 'A', age: 1, username: 'taken' } });
    const headers = { ...admin, 'Idempotency-Key': idempotencyKey() };
    const first = await http('POST', '/api/v1/users', {
      headers,
      body: { name: 'B', age: 2, username: 'taken' },
    });
    expect(first.status).to.equal(409);
    expect(first.body.code).to.equal(40904);
    const again = await http('POST', '/api/v1/users', {
      headers,
      body: { name: 'B', age: 2, username: 'taken' },
    });
    expect(again.status).to.equal(409);
    expect(again.body).to.deep.equal(first.body);
    expect(again.headers.get('idempotent-replayed')).to.equal('true');
  });
});

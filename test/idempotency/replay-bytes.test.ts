import { expect } from 'chai';
import { http } from '../support/http.js';
import { bearer, idempotencyKey, uniqueTenant } from '../support/tokens.js';

/**
 * A replay sends the bytes stored with the record (routers/answer.ts `bodyJson`), not the result
 * serialised again: the bytes must be the first answer's, whatever the body holds.
 */
describe('idempotency: a replay answers the first answer byte for byte', () => {
  it('when a user create with non-ASCII, escaped and null fields is retried (also on its alias), then each replay is the same bytes', async () => {
    const tenant = uniqueTenant();
    const headers = { ...bearer(tenant, '900000001', 'admin'), 'Idempotency-Key': idempotencyKey() };
    const body = { name: 'Zoë "Ann" \\ ✓ 😀', age: 30, username: 'zoe_1', email: null };
    const first = await http('POST', '/api/v1/users', { headers, body });
    expect(first.status).to.equal(201);
    for (const path of ['/api/v1/users', '/api/users']) {
      const again = await http('POST', path, { headers, body });
      expect(again.status).to.equal(201);
      expect(again.headers.get('idempotent-replayed')).to.equal('true');
      expect(again.text).to.equal(first.text);
      expect(again.headers.get('content-type')).to.equal(first.headers.get('content-type'));
      expect(again.headers.get('location')).to.equal(first.headers.get('location'));
    }
  });

  it('when an order create is retried, then the replay is the same bytes', async () => {
    const tenant = uniqueTenant();
    const headers = { ...bearer(tenant, '900000002', 'user'), 'Idempotency-Key': idempotencyKey() };
    const body = { merchantOrderNo: `m-${idempotencyKey()}`, amount: '10.5', description: 'café ✓' };
    const first = await http('POST', '/api/v1/orders', { headers, body });
    expect(first.status).to.equal(201);
    const again = await http('POST', '/api/v1/orders', { headers, body });
    expect(again.status).to.equal(201);
    expect(again.headers.get('idempotent-replayed')).to.equal('true');
    expect(again.text).to.equal(first.text);
  });
});

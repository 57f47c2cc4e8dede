import { expect } from 'chai';
import { http } from '../support/http.js';
import { bearer, uniqueTenant } from '../support/tokens.js';

describe('query integers and the tRPC media type', () => {
  for (const bad of ['1e3', '0x10', '+5', '1.5', '-1', '0', 'abc']) {
    it(`when page=${JSON.stringify(bad)} is sent, then 400 naming page`, async () => {
      const res = await http('GET', `/api/v1/users?page=${encodeURIComponent(bad)}`, {
        headers: bearer(uniqueTenant(), '1', 'admin'),
      });
      expect(res.status).to.equal(400);
      expect(res.body.message).to.match(/^page: /);
    });
  }

  it('when page is empty (page=), then it counts as absent: the default page 1', async () => {
    const res = await http('GET', '/api/v2/users?page=&size=5', {
      headers: bearer(uniqueTenant(), '1', 'admin'),
    });
    expect(res.status).to.equal(200);
    expect(res.body.data).to.include({ page: 1, size: 5 });
  });

  it('when page and size are plain digits, then they are used', async () => {
    const res = await http('GET', '/api/v2/users?page=3&size=7', {
      headers: bearer(uniqueTenant(), '1', 'admin'),
    });
    expect(res.status).to.equal(200);
    expect(res.body.data).to.include({ page: 3, size: 7 });
  });

  it('when a tRPC call declares a non-UTF-8 charset, then 415 in the envelope', async () => {
    const res = await http('POST', '/trpc/users.create', {
      headers: {
        ...bearer(uniqueTenant(), '1', 'admin'),
        'Content-Type': 'application/json; charset=latin1',
      },
      raw: JSON.stringify({ name: 'A', age: 1 }),
    });
    expect(res.status).to.equal(415);
    expect(res.body).to.deep.equal({ code: 415, message: res.body.message, data: null });
  });
});

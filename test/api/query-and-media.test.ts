import { request } from 'node:http';
import { expect } from 'chai';
import { http } from '../support/http.js';
import { sharedServer } from '../support/server.js';
import { bearer, uniqueTenant } from '../support/tokens.js';
import { adminOf } from '../support/users.js';

describe('query integers and the tRPC media type', () => {
  for (const bad of ['1e3', '0x10', '+5', '1.5', '-1', '0', 'abc']) {
    it(`when page=${JSON.stringify(bad)} is sent, then 400 naming page`, async () => {
      const res = await http('GET', `/api/v1/users?page=${encodeURIComponent(bad)}`, {
        headers: bearer(uniqueTenant(), '1', 'admin'),
      });
      expect(res.status).to.equal(400);
      // Not plain digits: the message says what to send (zod's own for a union is "Invalid input").
      expect(res.body.message).to.equal(
        bad === '0' ? 'page: Too small: expected number to be >=1' : 'page: must be a positive integer',
      );
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

  it('when a tRPC call sends no input, then it is the empty object: a list gets its defaults, a create a 400 naming its first missing field (as REST)', async () => {
    const headers = bearer(uniqueTenant(), '1', 'admin');
    for (const path of ['users.list', 'users.listPage', 'orders.list', 'events.list']) {
      const res = await http('GET', `/trpc/${path}`, { headers });
      expect(res.status, `${path}: ${res.text}`).to.equal(200);
    }
    const page = await http('GET', '/trpc/users.listPage', { headers });
    expect(page.body.result.data.data).to.include({ page: 1, size: 10, total: 0 });
    const create = await http('POST', '/trpc/users.create', {
      headers: { ...headers, 'Content-Type': 'application/json' },
    });
    expect(create.status, create.text).to.equal(400);
    expect(create.body.error.message).to.match(/^name: /);
  });

  it("when a tRPC call declares a non-UTF-8 charset, then 415 in tRPC's error format", async () => {
    const res = await http('POST', '/trpc/users.create', {
      headers: {
        ...bearer(uniqueTenant(), '1', 'admin'),
        'Content-Type': 'application/json; charset=latin1',
      },
      raw: JSON.stringify({ name: 'A', age: 1 }),
    });
    expect(res.status).to.equal(415);
    expect(res.body.error.data).to.include({ httpStatus: 415, businessCode: 415, path: 'users.create' });
  });
});

/** One request with the target as given (fetch always sends origin-form): status and body. */
function rawTarget(
  url: string,
  method: string,
  target: string,
  headers: Record<string, string>,
  body?: string,
): Promise<{ status: number; body: string }> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const req = request({ hostname, port, method, path: target, headers }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => {
        text += c;
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

describe('request targets in absolute form (RFC 9112 section 3.2.2)', () => {
  it('when a REST route is asked for as http://host/path?query, then it is routed by its path and query, as in origin form', async () => {
    const { url } = await sharedServer();
    const tenant = uniqueTenant();
    const headers = { ...adminOf(tenant), 'content-type': 'application/json' };
    const created = await rawTarget(url, 'POST', `${url}/api/v1/users`, headers, '{"name":"Abs","age":3}');
    expect(created.status, created.body).to.equal(201);
    const page = await rawTarget(url, 'GET', `${url}/api/v2/users?size=5`, headers);
    expect(page.status, page.body).to.equal(200);
    expect(JSON.parse(page.body).data).to.include({ page: 1, size: 5, total: 1 });
    const health = await rawTarget(url, 'GET', `${url}/healthz`, {});
    expect(health.status).to.equal(200);
  });
});

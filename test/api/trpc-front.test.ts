// The tRPC front (server/trpc-front.ts) answers a single POST of a mutation without tRPC's HTTP
// adapter; any request with a query string still goes to the adapter (tRPC ignores a parameter it
// does not know). So each request below is sent twice, to `/trpc/<path>` (the front) and to
// `/trpc/<path>?via=adapter` (tRPC's adapter in Express), and the two answers must be the same:
// status, the headers a client reads, and the body's bytes.
import { expect } from 'chai';

// The shared server's MAX_BODY_BYTES (the default, as test/api/errors.test.ts).
const MAX_BODY_BYTES = 65536;

import { type HttpResult, http } from '../support/http.js';
import { sharedServer } from '../support/server.js';
import { bearer, idempotencyKey, uniqueTenant } from '../support/tokens.js';
import { adminOf } from '../support/users.js';

const HEADERS = ['content-type', 'vary', 'location', 'retry-after', 'idempotent-replayed', 'allow'];

function seen(r: HttpResult) {
  return {
    status: r.status,
    headers: Object.fromEntries(HEADERS.map((h) => [h, r.headers.get(h)])),
    text: r.text,
  };
}

/** The same request to the front and to the adapter; both answers, and a check that they agree. */
async function both(path: string, headers: Record<string, string>, raw: string | undefined) {
  const front = await http('POST', `/trpc/${path}`, { headers, raw });
  const adapter = await http('POST', `/trpc/${path}?via=adapter`, { headers, raw });
  expect(seen(front), `front and adapter differ for ${raw?.slice(0, 80)}`).to.deep.equal(seen(adapter));
  // Both paths really ran: the front writes its body at once (a Content-Length), the adapter streams
  // it (chunked).
  expect(front.headers.get('content-length'), 'answered by the front').to.equal(
    String(Buffer.byteLength(front.text)),
  );
  expect(adapter.headers.get('transfer-encoding'), 'answered by the adapter').to.equal('chunked');
  return front;
}

const json = { 'Content-Type': 'application/json' };

describe('tRPC front: a single POST of a mutation, answered as tRPC answers it', () => {
  before(async () => {
    await sharedServer();
  });

  it('when a request fails in any of the ways a client can make it fail, then the front answers exactly what the adapter answers', async () => {
    const tenant = uniqueTenant('tfront');
    const admin = { ...adminOf(tenant), ...json };
    const cases: Array<[string, Record<string, string>, string | undefined, number]> = [
      ['no token', json, '{"name":"A","age":1}', 401],
      [
        'a user token on an admin-only create',
        { ...bearer(tenant, '840000001'), ...json },
        '{"name":"A","age":1}',
        403,
      ],
      ['a field missing', admin, '{"age":1}', 400],
      ['an unknown field', admin, '{"name":"A","age":1,"nick":"x"}', 400],
      ['a number for a string', admin, '{"name":5,"age":1}', 400],
      ['malformed JSON', admin, '{"name":', 400],
      ['no body', admin, undefined, 400],
      ['an empty body', admin, '', 400],
      ['JSON that is not an object', admin, '"text"', 400],
      ['a byte-order mark before the JSON', admin, '\uFEFF{"age":1}', 400],
      ['a body one byte over MAX_BODY_BYTES', admin, `{"name":"${'x'.repeat(MAX_BODY_BYTES)}"}`, 413],
      [
        'a malformed Idempotency-Key',
        { ...admin, 'Idempotency-Key': 'no spaces allowed' },
        '{"name":"A","age":1}',
        400,
      ],
    ];
    for (const [label, headers, raw, status] of cases) {
      const answer = await both('users.create', headers, raw);
      expect(answer.status, `${label}: ${answer.text}`).to.equal(status);
      expect(answer.body?.error?.data?.httpStatus, label).to.equal(status);
    }
  });

  it('when a create succeeds, then 200 with the envelope as the result, the same shape as the adapter gives, and the row is made once per request', async () => {
    const tenant = uniqueTenant('tfront');
    const admin = { ...adminOf(tenant), ...json };
    const front = await http('POST', '/trpc/users.create', {
      headers: admin,
      raw: '{"name":"Front","age":20}',
    });
    const adapter = await http('POST', '/trpc/users.create?via=adapter', {
      headers: admin,
      raw: '{"name":"Front","age":20}',
    });
    expect(front.status, front.text).to.equal(200);
    const strip = (r: HttpResult) =>
      r.text.replace(/"id":"[0-9]+"/, '"id":"?"').replace(/"20[0-9-]+T[0-9:.]+Z"/g, '"?"');
    const same = (r: HttpResult) => {
      const s = seen(r);
      return {
        ...s,
        text: strip(r),
        headers: { ...s.headers, location: s.headers.location?.replace(/[0-9]+$/, '?') },
      };
    };
    expect(same(front)).to.deep.equal(same(adapter));
    expect(front.headers.get('location')).to.equal(`/api/v1/users/${front.body.result.data.data.id}`);
    expect(front.body.result.data.code).to.equal(200);
    expect(front.body.result.data.data.id).to.not.equal(adapter.body.result.data.data.id);
  });

  it('when a keyed create is retried, then the replay and its headers are the same through the front and the adapter, and a changed body is the same 409', async () => {
    const tenant = uniqueTenant('tfront');
    const key = idempotencyKey();
    const headers = { ...adminOf(tenant), ...json, 'Idempotency-Key': key };
    const first = await http('POST', '/trpc/users.create', { headers, raw: '{"name":"Keyed","age":30}' });
    expect(first.status, first.text).to.equal(200);
    const replay = await both('users.create', headers, '{"name":"Keyed","age":30}');
    expect(replay.headers.get('idempotent-replayed')).to.equal('true');
    expect(replay.text).to.equal(first.text);
    const mismatch = await both('users.create', headers, '{"name":"Other","age":30}');
    expect(mismatch.status).to.equal(409);
    expect(mismatch.body.error.data.mismatch).to.deep.equal(['/name']);
  });

  it('when the request is not a single JSON POST of a known mutation, then the front leaves it to the adapter (a query, a batch, an unknown procedure, another media type)', async () => {
    const tenant = uniqueTenant('tfront');
    const admin = adminOf(tenant);
    const unknown = await http('POST', '/trpc/users.nope', { headers: { ...admin, ...json }, raw: '{}' });
    expect(unknown.status).to.equal(404);
    const query = await http('POST', '/trpc/users.list', { headers: { ...admin, ...json }, raw: '{}' });
    expect(query.status).to.equal(405);
    const batch = await http('POST', '/trpc/users.create?batch=1', {
      headers: { ...admin, ...json },
      raw: '{}',
    });
    expect(batch.status).to.equal(400);
    const text = await http('POST', '/trpc/users.create', {
      headers: { ...admin, 'Content-Type': 'text/plain' },
      raw: '{"name":"A","age":1}',
    });
    expect(text.status).to.equal(415);
  });
});

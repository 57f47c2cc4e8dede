import { randomBytes } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { expect } from 'chai';
import { ResponseCipher } from '../../idempotency/response-cipher.js';
import { openReply, sealReply, storedBodyJson } from '../../idempotency/stored-reply.js';
import { deliver, deliveredFor } from '../../routers/answer.js';
import type { Context } from '../../routers/context.js';

const SCOPE = 'tenant-a:42:users.create:abcdefghijklmnop';
const cipher = new ResponseCipher('k1', randomBytes(32));

// Bodies whose text a careless slice would cut wrongly: the head's own characters inside strings,
// escapes, a lone surrogate (serialised as \ud800), non-ASCII, numbers, nesting, an empty object.
const BODIES: unknown[] = [
  { code: 200, message: 'Success', data: { id: '1', name: 'Zoë ✓', age: 30, username: null } },
  { code: 200, message: '"b":{"s":1}}', data: { name: 'a}b"c\\d\n\u2028', note: '\ud800' } },
  { code: 200, message: 'Success', data: [1.5, -0, 1e21, { nested: { deeper: [] } }] },
  {},
  'a string body',
  0,
];
const HEADERS: Array<Record<string, string>> = [
  { Location: '/api/v1/users/1' },
  { Location: '/x","b":{"y":"}' },
  {},
];

describe('unit: stored replies (idempotency/stored-reply.ts)', () => {
  it('when a reply is sealed and opened, then its body text is exactly the JSON the body was stored as', () => {
    for (const body of BODIES) {
      for (const headers of HEADERS) {
        const opened = openReply(cipher, SCOPE, sealReply(cipher, SCOPE, { status: 201, headers, body }));
        expect(opened).to.deep.include({ status: 201, headers, body: JSON.parse(JSON.stringify(body)) });
        expect(opened.bodyJson).to.equal(JSON.stringify(body));
      }
    }
  });

  it('when a reply without a body is opened, then it has no body text', () => {
    const opened = openReply(
      cipher,
      SCOPE,
      sealReply(cipher, SCOPE, { status: 204, headers: {}, body: undefined }),
    );
    expect(opened.body).to.equal(undefined);
    expect(storedBodyJson(opened)).to.equal(undefined);
  });

  it('when a record holds the stored form in another key order, then its body text is still the body', () => {
    const body = { code: 200, message: 'Success', data: { id: '7' } };
    const stored = cipher.encrypt(JSON.stringify({ b: body, h: { Location: '/l' }, s: 201 }), SCOPE);
    expect(openReply(cipher, SCOPE, stored).bodyJson).to.equal(JSON.stringify(body));
  });

  it('when the decrypted text is not a stored reply, then opening it throws', () => {
    for (const bad of [{ s: '201', h: {} }, { s: 201, h: { a: 1 } }, { s: 201, h: [] }, [1], null]) {
      const stored = cipher.encrypt(JSON.stringify(bad), SCOPE);
      expect(() => openReply(cipher, SCOPE, stored), JSON.stringify(bad)).to.throw();
    }
  });

  it('when a replayed success is delivered, then the transport is given its stored body text; an executed one or a replayed failure is not', () => {
    const body = { code: 200, message: 'Success', data: { id: '9', name: 'Ann' } };
    const opened = openReply(cipher, SCOPE, sealReply(cipher, SCOPE, { status: 201, headers: {}, body }));
    const request = () => ({}) as IncomingMessage;
    const ctx = (r: IncomingMessage) => ({ request: r }) as unknown as Context;

    const replayed = request();
    expect(deliver(ctx(replayed), { kind: 'replayed', reply: opened })).to.deep.equal(body);
    expect(deliveredFor(replayed)?.bodyJson).to.equal(JSON.stringify(body));

    const executed = request();
    deliver(ctx(executed), { kind: 'executed', reply: opened });
    expect(deliveredFor(executed)?.bodyJson).to.equal(undefined);

    const failure = { code: 40904, message: 'username: already taken', data: null };
    const failed = openReply(
      cipher,
      SCOPE,
      sealReply(cipher, SCOPE, { status: 409, headers: {}, body: failure }),
    );
    const refused = request();
    expect(() => deliver(ctx(refused), { kind: 'replayed', reply: failed })).to.throw();
    expect(deliveredFor(refused)?.bodyJson).to.equal(undefined);
  });
});

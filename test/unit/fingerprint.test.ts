import { createHmac } from 'node:crypto';
import { expect } from 'chai';
import {
  canonicalJson,
  type FingerprintInput,
  fieldDigests,
  fingerprint,
  fingerprintV1,
  mismatchedFields,
  NORMALISATION_VERSION,
  normaliseBody,
  normaliseMediaType,
} from '../../idempotency/fingerprint.js';
import { createOrderInput } from '../../routers/orders/orders.schema.js';

const KEY = 'golden-vector-hmac-key-0123456789';

const ORDER: Omit<FingerprintInput, 'body'> = {
  method: 'POST',
  path: '/api/v1/orders',
  route: '/api/v1/orders',
  mediaType: 'application/json',
  apiVersion: 'v1',
  tenantId: 'tenant-a',
  userId: '42',
  nonBusiness: ['traceId'],
};

/** The fingerprint of an orders.create body as the middleware computes it: after the zod parse. */
function orderDigest(raw: unknown, over: Partial<FingerprintInput> = {}): string {
  return fingerprint(KEY, { ...ORDER, body: createOrderInput.parse(raw), ...over });
}
/** The same under the previous rules (fp1), which records written before fp2 hold. */
function orderDigestV1(raw: unknown): string {
  return fingerprintV1(KEY, { ...ORDER, body: createOrderInput.parse(raw) });
}

describe('unit: fingerprint golden vectors (a change of rules needs a new NORMALISATION_VERSION)', () => {
  it('when the normalisation version is read, then it is fp2 (the fp1 vectors below stay for older records)', () => {
    expect(NORMALISATION_VERSION).to.equal('fp2');
  });

  it('when an order {mo-1, 10} is fingerprinted, then the fixed digest of fp2, and of fp1', () => {
    expect(orderDigest({ merchantOrderNo: 'mo-1', amount: 10 })).to.equal(
      'e066d16c0367bfec79ffeb9adf412954833e8f2d375d870631276b6d0721433d',
    );
    expect(orderDigestV1({ merchantOrderNo: 'mo-1', amount: 10 })).to.equal(
      'd121d2535eb1e4effa42f0a4f1afaeb35126ece4f1b49b81840138691326d4d3',
    );
  });

  it('when description is null or absent, then fp2 gives one digest (fp1 gave two: the defect)', () => {
    const absent = { merchantOrderNo: 'mo-1', amount: 10 };
    const nulled = { ...absent, description: null };
    expect(orderDigest(nulled)).to.equal(orderDigest(absent));
    expect(orderDigestV1(nulled)).to.equal(
      '36027d44e28ab024d2926f6a17c31ca558450ebcfd49e1888485b86d7ff0cc11',
    );
    expect(orderDigestV1(nulled)).to.not.equal(orderDigestV1(absent));
  });

  it('when the first vector is recomputed by hand from the documented message, then it matches', () => {
    // version, method, path, media type, API version, tenant, user: each JSON-encoded, newline-joined,
    // then the canonical body (defaults applied, keys sorted, amount canonical).
    const message = [
      '"fp2"',
      '"POST"',
      '"/api/v1/orders"',
      '"application/json"',
      '"v1"',
      '"tenant-a"',
      '"42"',
      '{"amount":"10.00","currency":"USD","merchantOrderNo":"mo-1"}',
    ].join('\n');
    const byHand = createHmac('sha256', KEY).update(message).digest('hex');
    expect(orderDigest({ merchantOrderNo: 'mo-1', amount: 10 })).to.equal(byHand);
    const v1 = createHmac('sha256', KEY).update(message.replace('"fp2"', '"fp1"')).digest('hex');
    expect(orderDigestV1({ merchantOrderNo: 'mo-1', amount: 10 })).to.equal(v1);
  });

  it('when an order with currency and description is fingerprinted, then the fixed digest', () => {
    const body = { merchantOrderNo: 'mo-2', amount: '0.5', currency: 'EUR', description: 'Two words' };
    expect(orderDigest(body)).to.equal('3f0f1ba36346a0fad43c9b4dfa9940102e944ce3a730b45e4c210f808cf908c3');
    expect(orderDigestV1(body)).to.equal('394f00928d31b579120f6c9295f80056b39b269cd7084e10d10f52f898d83189');
  });

  it('when a users PATCH with a non-ASCII name and a charset parameter is fingerprinted, then the fixed digest; NFC and NFD spellings are one request under fp2 only', () => {
    const patch = (name: string): FingerprintInput => ({
      method: 'PATCH',
      path: '/api/v1/users/7',
      route: '/api/v1/users/{id}',
      mediaType: 'application/json; charset=utf-8',
      apiVersion: 'v1',
      tenantId: 'acme',
      userId: '900000001',
      body: { name, age: 30 },
    });
    const nfc = patch('Zo\u00eb');
    const nfd = patch('Zoe\u0308');
    expect(fingerprint(KEY, nfc)).to.equal(
      '5334433d5c9433f0fa205a3fe5ad2306c24d38e4fa30a5d4c6897fed440ff1fb',
    );
    expect(fingerprint(KEY, nfd)).to.equal(fingerprint(KEY, nfc));
    expect(fingerprintV1(KEY, nfc)).to.equal(
      'd68bbb41064802ea09ced2404b882e8167ddde39f5bea93d7ec080a62ee78827',
    );
    expect(fingerprintV1(KEY, nfd)).to.not.equal(fingerprintV1(KEY, nfc));
  });

  it('when a DELETE without a Content-Type is fingerprinted, then the fixed digest', () => {
    const digest = fingerprintV1(KEY, {
      method: 'DELETE',
      path: '/api/v1/users/7',
      route: '/api/v1/users/{id}',
      mediaType: undefined,
      apiVersion: 'v1',
      tenantId: 'acme',
      userId: '1',
      body: { id: '7' },
    });
    expect(digest).to.equal('a91ed0bc7ab060984753221df20fe0696bd1b9bc31d2051c5f701478be9dd4c1');
  });

  it('when any input is fingerprinted, then the digest is 64 lower-case hex characters', () => {
    expect(orderDigest({ merchantOrderNo: 'x', amount: 1 })).to.match(/^[0-9a-f]{64}$/);
  });
});

describe('unit: fingerprint normalisation', () => {
  const reference = orderDigest({ merchantOrderNo: 'mo-9', amount: '10.00', currency: 'USD' });

  it('when the amount is 10, 10.0, "10", "10.0" or "10.00", then one digest', () => {
    for (const amount of [10, 10.0, '10', '10.0', '10.00']) {
      expect(orderDigest({ merchantOrderNo: 'mo-9', amount }), String(amount)).to.equal(reference);
    }
  });

  it('when the amount differs by one cent, then another digest', () => {
    expect(orderDigest({ merchantOrderNo: 'mo-9', amount: '10.01' })).to.not.equal(reference);
  });

  it('when the body keys come in another order, then the same digest', () => {
    expect(orderDigest({ currency: 'USD', amount: 10, merchantOrderNo: 'mo-9' })).to.equal(reference);
  });

  it('when currency is omitted, then the digest equals the one with currency "USD"', () => {
    expect(orderDigest({ merchantOrderNo: 'mo-9', amount: 10 })).to.equal(reference);
    expect(orderDigest({ merchantOrderNo: 'mo-9', amount: 10, currency: 'EUR' })).to.not.equal(reference);
  });

  it('when only traceId differs (or is absent), then the same digest', () => {
    expect(orderDigest({ merchantOrderNo: 'mo-9', amount: 10, traceId: 'trace-1' })).to.equal(reference);
    expect(orderDigest({ merchantOrderNo: 'mo-9', amount: 10, traceId: 'trace-2' })).to.equal(reference);
  });

  it('when traceId is not declared non-business, then it does change the digest (the exclusion is what keeps it out)', () => {
    const withTrace = createOrderInput.parse({ merchantOrderNo: 'mo-9', amount: 10, traceId: 't' });
    expect(fingerprint(KEY, { ...ORDER, nonBusiness: [], body: withTrace })).to.not.equal(reference);
  });

  it('when the description is given, then another digest than without it', () => {
    expect(orderDigest({ merchantOrderNo: 'mo-9', amount: 10, description: 'd' })).to.not.equal(reference);
  });

  it('when tenant, user, path, method, API version, HMAC key or body differ, then the digest differs each time', () => {
    const body = createOrderInput.parse({ merchantOrderNo: 'mo-9', amount: 10 });
    const variants = [
      fingerprint(KEY, { ...ORDER, body, tenantId: 'tenant-b' }),
      fingerprint(KEY, { ...ORDER, body, userId: '43' }),
      fingerprint(KEY, { ...ORDER, body, path: '/api/v1/payments' }),
      fingerprint(KEY, { ...ORDER, body, method: 'PUT' }),
      fingerprint(KEY, { ...ORDER, body, apiVersion: 'v2' }),
      fingerprint(`${KEY}-other`, { ...ORDER, body }),
      orderDigest({ merchantOrderNo: 'mo-10', amount: 10 }),
    ];
    expect(new Set([reference, ...variants]).size).to.equal(variants.length + 1);
  });

  it('when the method is lower case or the media type has parameters or capitals, then the same digest', () => {
    const body = createOrderInput.parse({ merchantOrderNo: 'mo-9', amount: 10 });
    expect(fingerprint(KEY, { ...ORDER, body, method: 'post' })).to.equal(reference);
    expect(fingerprint(KEY, { ...ORDER, body, mediaType: 'Application/JSON; charset=utf-8' })).to.equal(
      reference,
    );
    expect(fingerprint(KEY, { ...ORDER, body, mediaType: undefined })).to.equal(reference);
    expect(fingerprint(KEY, { ...ORDER, body, mediaType: 'text/plain' })).to.not.equal(reference);
  });

  it('when a field value contains the separator, then it cannot collide with a shifted split of the fields', () => {
    // A plain newline join would give "a\nb\nc" for both.
    const body = { a: 1 };
    const one = fingerprint(KEY, { ...ORDER, body, tenantId: 'a\nb', userId: 'c' });
    const two = fingerprint(KEY, { ...ORDER, body, tenantId: 'a', userId: 'b\nc' });
    expect(one).to.not.equal(two);
  });
});

describe('unit: field digests (the fields a 40901 names)', () => {
  /** A keyed PATCH of user `id` as routers/idempotent-request.ts builds it: the id is an input field. */
  const patch = (id: string, body: Record<string, unknown>): FingerprintInput => ({
    method: 'PATCH',
    path: `/api/v1/users/${id}`,
    route: '/api/v1/users/{id}',
    mediaType: 'application/json',
    apiVersion: 'v1',
    tenantId: 'acme',
    userId: '1',
    body: { id, ...body },
  });
  const named = (first: FingerprintInput, now: FingerprintInput) =>
    mismatchedFields(fieldDigests(KEY, first), fieldDigests(KEY, now));

  it('when the same body is sent to another id, then only /id is named (the fingerprints still differ)', () => {
    const four = patch('4', { name: 'Same', age: 5 });
    const five = patch('5', { name: 'Same', age: 5 });
    expect(named(four, five)).to.deep.equal(['/id']);
    expect(fingerprint(KEY, five)).to.not.equal(fingerprint(KEY, four));
  });

  it('when another id also comes with another age, then /age and /id are named, not /name', () => {
    expect(named(patch('4', { name: 'Same', age: 5 }), patch('5', { name: 'Same', age: 6 }))).to.deep.equal([
      '/age',
      '/id',
    ]);
  });

  it('when method, route, tenant or user differ, then every field digest differs (each stays bound to them)', () => {
    const base = patch('4', { name: 'Same' });
    const variants: FingerprintInput[] = [
      { ...base, method: 'PUT' },
      { ...base, route: '/api/v2/users/{id}' },
      { ...base, tenantId: 'other' },
      { ...base, userId: '2' },
    ];
    for (const variant of variants) {
      expect(named(base, variant), JSON.stringify(variant)).to.deep.equal(['/id', '/name']);
    }
  });
});

describe('unit: canonicalJson and normaliseBody', () => {
  it('when objects are nested with unsorted keys, then keys are sorted at every level', () => {
    expect(canonicalJson({ b: 1, a: { d: [3, { z: 1, y: 2 }], c: null } })).to.equal(
      '{"a":{"c":null,"d":[3,{"y":2,"z":1}]},"b":1}',
    );
  });

  it('when members are undefined, then they are dropped from objects and become null in arrays', () => {
    expect(canonicalJson({ a: undefined, b: 2 })).to.equal('{"b":2}');
    expect(canonicalJson([1, undefined, 3])).to.equal('[1,null,3]');
    expect(canonicalJson(undefined)).to.equal('null');
  });

  it('when scalars and strings with special characters are given, then they are JSON-encoded', () => {
    expect(canonicalJson('a"b\nc')).to.equal('"a\\"b\\nc"');
    expect(canonicalJson(1.5)).to.equal('1.5');
    expect(canonicalJson(true)).to.equal('true');
    expect(canonicalJson(null)).to.equal('null');
  });

  it('when keys differ only in case or are non-ASCII, then the order is by code unit', () => {
    expect(canonicalJson({ b: 1, B: 2, é: 3, a: 4 })).to.equal('{"B":2,"a":4,"b":1,"é":3}');
  });

  it('when non-business fields are listed, then only top-level members of that name are removed', () => {
    expect(normaliseBody({ traceId: 't', x: { traceId: 'kept' } }, ['traceId'])).to.equal(
      '{"x":{"traceId":"kept"}}',
    );
  });

  it('when the body is absent, then it normalises to null', () => {
    expect(normaliseBody(undefined)).to.equal('null');
  });

  it('when media types are normalised, then lower case without parameters, JSON by default', () => {
    expect(normaliseMediaType('Application/Json; Charset=UTF-8')).to.equal('application/json');
    expect(normaliseMediaType(undefined)).to.equal('application/json');
    expect(normaliseMediaType('text/plain')).to.equal('text/plain');
  });
});

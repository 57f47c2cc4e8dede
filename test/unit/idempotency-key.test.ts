import { expect } from 'chai';
import { ValidationError } from '../../core/errors.js';
import { readIdempotencyKey, scopeKey, userScope } from '../../idempotency/key.js';
import { errorAnswer } from '../../routers/error-answer.js';

/**
 * The answer to the error the header check throws (a validation error, answered through the error
 * table), or undefined when it accepts.
 */
function refusal(header: string | string[] | undefined, required: boolean) {
  try {
    readIdempotencyKey(header, required);
    return undefined;
  } catch (err) {
    expect(err).to.be.instanceOf(ValidationError);
    const { status, body } = errorAnswer(err);
    return { status, code: body.code, message: body.message };
  }
}

describe('unit: Idempotency-Key header validation', () => {
  it('when the key has 16 or 64 allowed characters, then it is returned unchanged', () => {
    const k16 = 'aZ09_-aZ09_-aZ09';
    const k64 = `${'A'.repeat(32)}${'z'.repeat(16)}0123456789_-_-_-`;
    expect(k16).to.have.length(16);
    expect(k64).to.have.length(64);
    expect(readIdempotencyKey(k16, true)).to.equal(k16);
    expect(readIdempotencyKey(k64, false)).to.equal(k64);
    expect(readIdempotencyKey('123e4567-e89b-12d3-a456-426614174000', true)).to.equal(
      '123e4567-e89b-12d3-a456-426614174000',
    );
  });

  it('when the key has 15 or 65 characters, then 400 naming the header', () => {
    for (const key of ['a'.repeat(15), 'a'.repeat(65)]) {
      const err = refusal(key, false);
      expect(err, key).to.not.equal(undefined);
      expect(err?.status).to.equal(400);
      expect(err?.code).to.equal(400);
      expect(err?.message).to.match(/^Idempotency-Key: /);
    }
  });

  it('when the key has a character outside [A-Za-z0-9_-], then 400', () => {
    const base = 'abcdefghijklmnop';
    for (const bad of [' ', ':', '.', '/', '+', '=', 'é', '\n', '*', '%']) {
      const err = refusal(base + bad, true);
      expect(err?.status, JSON.stringify(bad)).to.equal(400);
    }
  });

  it('when the header is repeated (an array), then 400', () => {
    expect(refusal(['abcdefghijklmnop', 'abcdefghijklmnop'], false)?.status).to.equal(400);
  });

  it('when the key is missing or empty and required, then 400 "Idempotency-Key: header is required"', () => {
    for (const header of [undefined, '']) {
      const err = refusal(header, true);
      expect(err?.status).to.equal(400);
      expect(err?.message).to.equal('Idempotency-Key: header is required');
    }
  });

  it('when the key is missing or empty and optional, then undefined (the server never invents one)', () => {
    expect(readIdempotencyKey(undefined, false)).to.equal(undefined);
    expect(readIdempotencyKey('', false)).to.equal(undefined);
  });
});

describe('unit: idempotency scope', () => {
  const key = 'abcdefghijklmnop';

  it('when tenant, user, operation or key differ, then the scope keys all differ', () => {
    const scopes = [
      scopeKey('t1', '1', 'orders.create', key),
      scopeKey('t2', '1', 'orders.create', key),
      scopeKey('t1', '2', 'orders.create', key),
      scopeKey('t1', '1', 'users.create', key),
      scopeKey('t1', '1', 'orders.create', `${key}x`),
    ];
    expect(new Set(scopes).size).to.equal(scopes.length);
  });

  it('when the same four parts are given, then the same scope key (a retry finds its record)', () => {
    expect(scopeKey('t1', '1', 'orders.create', key)).to.equal(scopeKey('t1', '1', 'orders.create', key));
  });

  it('when the parts are at their maximum lengths, then the scope key fits the 200-character column', () => {
    const longest = scopeKey('t'.repeat(36), '9223372036854775807', 'x'.repeat(40), 'k'.repeat(64));
    expect(longest.length).to.be.at.most(200);
  });

  it('when the user scope is built, then it separates tenants and users and prefixes their scope keys', () => {
    expect(userScope('t1', '1')).to.not.equal(userScope('t1', '2'));
    expect(userScope('t1', '1')).to.not.equal(userScope('t2', '1'));
    expect(scopeKey('t1', '1', 'orders.create', key).startsWith(`${userScope('t1', '1')}:`)).to.equal(true);
    expect(userScope('t'.repeat(36), '9223372036854775807').length).to.be.at.most(60);
  });
});

import { expect } from 'chai';
import jwt from 'jsonwebtoken';
import { Unauthorized } from '../../core/errors.js';
import { signToken, verifyBearer } from '../../routers/auth/jwt.js';

const SECRET = 'unit-test-secret-0123456789abcdef';
const OTHER = 'unit-test-other-secret-0123456789';

function refused(secret: string, header: string): string {
  try {
    verifyBearer(secret, header);
  } catch (err) {
    expect(err).to.be.instanceOf(Unauthorized);
    return (err as Error).message;
  }
  throw new Error('the token was accepted');
}

/** Runs `body` with Date.now moved by `ms` (the verified-token cache reads the clock). */
function later<T>(ms: number, body: () => T): T {
  const real = Date.now;
  Date.now = () => real() + ms;
  try {
    return body();
  } finally {
    Date.now = real;
  }
}

describe('bearer verification and its cache of verified tokens', () => {
  it('when the same token comes again, then it gives the same identity (and it cannot be changed)', () => {
    const { token } = signToken(SECRET, { userId: '42', tenantId: 't-cache', role: 'user' }, 3600);
    const first = verifyBearer(SECRET, `Bearer ${token}`);
    const second = verifyBearer(SECRET, `Bearer ${token}`);
    expect(second).to.deep.equal({ userId: '42', tenantId: 't-cache', role: 'user' });
    expect(second).to.deep.equal(first);
    expect(Object.isFrozen(second)).to.equal(true);
  });

  it('when a token verified before has expired since, then it is refused as expired (the cache does not extend it)', () => {
    const { token } = signToken(SECRET, { userId: '43', tenantId: 't-cache', role: 'user' }, 60);
    verifyBearer(SECRET, `Bearer ${token}`);
    expect(later(61_000, () => refused(SECRET, `Bearer ${token}`))).to.equal('Token expired');
    // Still valid just before its exp.
    expect(later(55_000, () => verifyBearer(SECRET, `Bearer ${token}`)).userId).to.equal('43');
  });

  it('when a token verified under one secret comes under another, then it is refused', () => {
    const { token } = signToken(SECRET, { userId: '44', tenantId: 't-cache', role: 'user' }, 3600);
    verifyBearer(SECRET, `Bearer ${token}`);
    expect(refused(OTHER, `Bearer ${token}`)).to.equal('Invalid token');
  });

  it('when a verified token is altered (claims or signature), then the altered one is refused', () => {
    const { token } = signToken(SECRET, { userId: '45', tenantId: 't-cache', role: 'user' }, 3600);
    verifyBearer(SECRET, `Bearer ${token}`);
    const [head, body, sig] = token.split('.');
    const claims = JSON.parse(Buffer.from(body, 'base64url').toString());
    const promoted = Buffer.from(JSON.stringify({ ...claims, role: 'admin' })).toString('base64url');
    expect(refused(SECRET, `Bearer ${head}.${promoted}.${sig}`)).to.equal('Invalid token');
    const flipped = sig.slice(0, -2) + (sig.endsWith('AA') ? 'BB' : 'AA');
    expect(refused(SECRET, `Bearer ${head}.${body}.${flipped}`)).to.equal('Invalid token');
  });

  it('when a token has no exp, or alg none, then it is refused (and so never kept)', () => {
    const noExp = jwt.sign({ sub: '46', tid: 't-cache', role: 'user' }, SECRET, { algorithm: 'HS256' });
    expect(refused(SECRET, `Bearer ${noExp}`)).to.equal('Invalid token claims');
    expect(refused(SECRET, `Bearer ${noExp}`)).to.equal('Invalid token claims');
    const none = jwt.sign({ sub: '47', tid: 't-cache', role: 'user', exp: 9999999999 }, '', {
      algorithm: 'none',
    });
    expect(refused(SECRET, `Bearer ${none}`)).to.equal('Invalid token');
  });
});

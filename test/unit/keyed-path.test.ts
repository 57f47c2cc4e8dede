import { expect } from 'chai';
import { RecentKeys } from '../../idempotency/recent-keys.js';
import { chooseKeyedPath } from '../../routers/keyed-path.js';

function ctx(userCheckInWrite: boolean, opts: { recent?: string[]; supported?: boolean } = {}) {
  const recent = new RecentKeys();
  for (const key of opts.recent ?? []) recent.add(key);
  return {
    userCheckInWrite,
    services: { idempotency: { recent, atOnceSupported: () => opts.supported ?? true } },
  };
}

describe('chooseKeyedPath: the one choice of a keyed create (routers/keyed-path.ts)', () => {
  it('when authentication read the user row, then the general path, whatever the key', () => {
    expect(chooseKeyedPath(ctx(false, { recent: ['s'] }), 's', false)).to.equal('general');
    expect(chooseKeyedPath(ctx(false), 's', false)).to.equal('general');
  });

  it('when the row was not read and the key is new to this process, then the one statement', () => {
    expect(chooseKeyedPath(ctx(true, { recent: ['other'] }), 's', false)).to.equal('one-statement');
  });

  it('when the key is one this process saw a record of, then the read first for a replay (no new id taken), also with a slow step or the one statement off', () => {
    expect(chooseKeyedPath(ctx(true, { recent: ['s'] }), 's', false)).to.equal('replay-read-first');
    expect(chooseKeyedPath(ctx(true, { recent: ['s'] }), 's', true)).to.equal('replay-read-first');
    expect(chooseKeyedPath(ctx(true, { recent: ['s'], supported: false }), 's', false)).to.equal(
      'replay-read-first',
    );
  });

  it('when the one statement cannot run now and the key is new to this process, then the read first that takes a new id', () => {
    expect(chooseKeyedPath(ctx(true, { supported: false }), 's', false)).to.equal('read-first');
  });

  it('when building the statement has a slow step for this input (a password), then the read first, and the general path when the row was read', () => {
    expect(chooseKeyedPath(ctx(true), 's', true)).to.equal('read-first');
    expect(chooseKeyedPath(ctx(false), 's', true)).to.equal('general');
  });
});

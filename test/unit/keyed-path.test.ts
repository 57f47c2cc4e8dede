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
    expect(chooseKeyedPath(ctx(false, { recent: ['s'] }), 's')).to.equal('general');
    expect(chooseKeyedPath(ctx(false), 's')).to.equal('general');
  });

  it('when the row was not read and the key is new to this process, then the one statement', () => {
    expect(chooseKeyedPath(ctx(true, { recent: ['other'] }), 's')).to.equal('one-statement');
  });

  it('when the key is one this process saw a record of, or the one statement cannot run now, then the read first', () => {
    expect(chooseKeyedPath(ctx(true, { recent: ['s'] }), 's')).to.equal('replay-read-first');
    expect(chooseKeyedPath(ctx(true, { supported: false }), 's')).to.equal('replay-read-first');
  });
});

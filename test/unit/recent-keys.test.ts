import { expect } from 'chai';
import { RecentKeys } from '../../idempotency/recent-keys.js';

describe('unit: RecentKeys (the hint that a key is most likely a replay)', () => {
  it('when keys are added, then they are known; past the bound the oldest go first, and adding a known key again keeps its place', () => {
    const recent = new RecentKeys(3);
    for (const k of ['a', 'b', 'c']) recent.add(k);
    recent.add('a');
    expect(['a', 'b', 'c'].map((k) => recent.has(k))).to.deep.equal([true, true, true]);
    recent.add('d');
    expect(['a', 'b', 'c', 'd'].map((k) => recent.has(k))).to.deep.equal([false, true, true, true]);
    recent.add('e');
    expect(recent.has('b')).to.equal(false);
    expect(recent.has('e')).to.equal(true);
  });
});

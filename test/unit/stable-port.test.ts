// The ports tests reserve for listeners opened later (test/support/stable-port.ts): outside the range
// the kernel hands out on its own, and never the same one twice in a process.
import { readFileSync } from 'node:fs';
import { expect } from 'chai';
import { stablePort } from '../support/stable-port.js';

describe('test support: stablePort', () => {
  it("when many ports are asked for at once, then they are distinct and below the kernel's ephemeral range", async function () {
    let low: number;
    try {
      low = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]);
    } catch {
      return this.skip(); // not Linux: no ephemeral range to read
    }
    const ports = await Promise.all(Array.from({ length: 50 }, () => stablePort()));
    expect(new Set(ports).size).to.equal(50);
    for (const port of ports) expect(port).to.be.below(low);
  });

  it('when the same port is drawn again after it was handed out (and closed), then another is given', async () => {
    const draws = [0.5, 0.5, 0.75];
    const random = Math.random;
    Math.random = () => draws.shift() ?? random();
    try {
      const first = await stablePort();
      const second = await stablePort();
      expect(second).to.not.equal(first);
      expect(draws, 'the second call drew twice').to.deep.equal([]);
    } finally {
      Math.random = random;
    }
  });
});

import { expect } from 'chai';
import { loadConfig } from '../../core/config.js';
import {
  checkDestination,
  type DestinationPolicy,
  DestinationRefused,
  policyFromConfig,
  refusedRange,
} from '../../events/destination-guard.js';

const production: DestinationPolicy = { production: true, allowPrivateNetworks: false };

async function refusal(url: string, policy: DestinationPolicy = production): Promise<string> {
  try {
    await checkDestination(url, policy);
  } catch (err) {
    expect(err).to.be.instanceOf(DestinationRefused);
    return (err as Error).message;
  }
  throw new Error(`${url} was accepted`);
}

describe('webhook destination guard (SSRF, CONTRACT section 12)', () => {
  it('names the refused range of every literal address, IPv4-mapped IPv6 included', () => {
    const cases: [string, string | null][] = [
      ['127.0.0.1', 'loopback'],
      ['127.255.0.9', 'loopback'],
      ['::1', 'loopback'],
      ['10.1.2.3', 'private'],
      ['172.16.0.1', 'private'],
      ['172.31.255.255', 'private'],
      ['192.168.1.1', 'private'],
      ['fc00::1', 'private'],
      ['fd12:3456::1', 'private'],
      ['169.254.1.1', 'link-local'],
      ['fe80::1', 'link-local'],
      ['100.64.0.1', 'carrier-grade NAT'],
      ['100.127.255.255', 'carrier-grade NAT'],
      ['0.0.0.0', 'unspecified'],
      ['::', 'unspecified'],
      ['169.254.169.254', 'cloud metadata'],
      ['fd00:ec2::254', 'cloud metadata'],
      ['::ffff:127.0.0.1', 'loopback'],
      ['::ffff:7f00:1', 'loopback'],
      ['::ffff:a9fe:a9fe', 'cloud metadata'],
      ['::ffff:10.0.0.1', 'private'],
      ['8.8.8.8', null],
      ['172.32.0.1', null],
      ['100.128.0.1', null],
      ['2606:4700::1111', null],
      ['::ffff:8.8.8.8', null],
    ];
    for (const [address, range] of cases) expect(refusedRange(address), address).to.equal(range);
  });

  it('when NODE_ENV=production, then literal private URLs are refused with the reason, brackets and mapping included', async () => {
    expect(await refusal('http://127.0.0.1:8080/hook')).to.match(/loopback/);
    expect(await refusal('http://[::ffff:127.0.0.1]/hook')).to.match(/loopback/);
    expect(await refusal('https://169.254.169.254/latest/meta-data')).to.match(/cloud metadata/);
    expect(await refusal('http://[fe80::1]/')).to.match(/link-local/);
    expect(await refusal('http://10.0.0.5/')).to.match(/WEBHOOK_ALLOW_PRIVATE_NETWORKS=1/);
  });

  it('when NODE_ENV=production and a host name resolves to 127.0.0.1 (localhost), then it is refused', async () => {
    expect(await refusal('http://localhost:3000/hook')).to.match(/localhost resolves to .*loopback/);
  });

  it('when any one of several addresses is private, then the host is refused', async () => {
    const resolveAll = async () => [
      { address: '93.184.216.34', family: 4 as const },
      { address: '10.0.0.7', family: 4 as const },
    ];
    try {
      await checkDestination('https://mixed.example/hook', production, resolveAll);
      expect.fail('accepted');
    } catch (err) {
      expect((err as Error).message).to.match(/10\.0\.0\.7, a private address/);
    }
  });

  it('when WEBHOOK_ALLOW_PRIVATE_NETWORKS=1 or outside production, then loopback is allowed', async () => {
    const allowed = policyFromConfig(loadConfig({ WEBHOOK_ALLOW_PRIVATE_NETWORKS: '1', NODE_ENV: 'test' }));
    expect(
      await checkDestination('http://localhost:3000/', { ...allowed, production: true }),
    ).to.have.property('address');
    const development = policyFromConfig(loadConfig({}));
    expect(development).to.deep.equal({ production: false, allowPrivateNetworks: false });
    expect(await checkDestination('http://127.0.0.1:3000/', development)).to.deep.equal({
      address: '127.0.0.1',
      family: 4,
    });
  });

  it('refuses other schemes, credentials and URLs over 2048 characters in any mode', async () => {
    const anyMode: DestinationPolicy = { production: false, allowPrivateNetworks: true };
    expect(await refusal('ftp://example.com/x', anyMode)).to.match(/http or https/);
    expect(await refusal('https://user:secret@example.com/x', anyMode)).to.match(/credentials/);
    expect(await refusal(`https://example.com/${'a'.repeat(2048)}`, anyMode)).to.match(/2048/);
    expect(await refusal('not-a-url', anyMode)).to.match(/valid absolute URL/);
  });

  it('refuses a URL with a space, tab, line break or control character anywhere (the parser would drop or encode them: the URL used would not be the URL stored)', async () => {
    const anyMode: DestinationPolicy = { production: false, allowPrivateNetworks: true };
    for (const url of [
      ' http://example.com/x',
      'http://example.com/x ',
      'http://exa\tmple.com/',
      'http://example.com/a b',
      'http://example.com/\n',
      'http://example.com/\u007f',
    ])
      expect(await refusal(url, anyMode), JSON.stringify(url)).to.match(/spaces or control characters/);
  });

  it('a public literal address is accepted in production', async () => {
    expect(await checkDestination('https://8.8.8.8/hook', production)).to.deep.equal({
      address: '8.8.8.8',
      family: 4,
    });
  });
});

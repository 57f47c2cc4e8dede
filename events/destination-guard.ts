import { promises as dns } from 'node:dns';
import { BlockList, isIP } from 'node:net';

/** Whether webhook destinations on private networks are refused (CONTRACT section 12, SSRF). */
export type DestinationPolicy = { production: boolean; allowPrivateNetworks: boolean };

export type ResolvedAddress = { address: string; family: 4 | 6 };
/** Every address a host name resolves to (injectable so a test can play a rebinding DNS). */
export type ResolveAll = (hostname: string) => Promise<ResolvedAddress[]>;

/** A destination the sender will not connect to; the message is safe to store and show. */
export class DestinationRefused extends Error {}

export const MAX_URL_LENGTH = 2048;

export const policyFromConfig = (config: {
  NODE_ENV: string;
  WEBHOOK_ALLOW_PRIVATE_NETWORKS: '0' | '1';
}): DestinationPolicy => ({
  production: config.NODE_ENV === 'production',
  allowPrivateNetworks: config.WEBHOOK_ALLOW_PRIVATE_NETWORKS === '1',
});

const ranges = (entries: [string, number, 'ipv4' | 'ipv6'][]) => {
  const list = new BlockList();
  for (const [network, prefix, type] of entries) list.addSubnet(network, prefix, type);
  return list;
};

// Checked in this order, so the metadata addresses are named before the link-local and private
// ranges that contain them.
const REFUSED: [string, BlockList][] = [
  [
    'cloud metadata',
    ranges([
      ['169.254.169.254', 32, 'ipv4'],
      ['fd00:ec2::254', 128, 'ipv6'],
    ]),
  ],
  [
    'loopback',
    ranges([
      ['127.0.0.0', 8, 'ipv4'],
      ['::1', 128, 'ipv6'],
    ]),
  ],
  [
    'unspecified',
    ranges([
      ['0.0.0.0', 8, 'ipv4'],
      ['::', 128, 'ipv6'],
    ]),
  ],
  [
    'private',
    ranges([
      ['10.0.0.0', 8, 'ipv4'],
      ['172.16.0.0', 12, 'ipv4'],
      ['192.168.0.0', 16, 'ipv4'],
      ['fc00::', 7, 'ipv6'],
    ]),
  ],
  [
    'link-local',
    ranges([
      ['169.254.0.0', 16, 'ipv4'],
      ['fe80::', 10, 'ipv6'],
    ]),
  ],
  ['carrier-grade NAT', ranges([['100.64.0.0', 10, 'ipv4']])],
  [
    'multicast or reserved',
    ranges([
      ['224.0.0.0', 3, 'ipv4'],
      ['ff00::', 8, 'ipv6'],
    ]),
  ],
];

/** The name of the refused range an IP address is in ("loopback", ...), or null for a public one. */
export function refusedRange(address: string): string | null {
  const family = isIP(address);
  if (family === 0) return 'not an IP address';
  // BlockList matches an IPv4-mapped IPv6 address (::ffff:7f00:1) against the IPv4 rules (Node's
  // documented behaviour, pinned by the test): it reaches the IPv4 host it embeds.
  for (const [name, list] of REFUSED) if (list.check(address, family === 4 ? 'ipv4' : 'ipv6')) return name;
  return null;
}

/** http/https, at most 2048 characters, no credentials: the rules that need no DNS. */
export function parseDestinationUrl(raw: string): URL {
  if (raw.length > MAX_URL_LENGTH)
    throw new DestinationRefused(`the URL is longer than ${MAX_URL_LENGTH} characters`);
  // The WHATWG parser strips leading and trailing spaces and control characters, and drops tabs and
  // line breaks inside; a URL stored as sent must be the URL used, so any of them is refused.
  if ([...raw].some((c) => c <= ' ' || c === '\u007f'))
    throw new DestinationRefused('the URL must not contain spaces or control characters');
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new DestinationRefused('the URL is not a valid absolute URL');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    throw new DestinationRefused('the URL must be http or https');
  if (url.username || url.password) throw new DestinationRefused('the URL must not contain credentials');
  return url;
}

const systemResolveAll: ResolveAll = async (hostname) =>
  (await dns.lookup(hostname, { all: true, verbatim: true })).map(({ address, family }) => ({
    address,
    family: family === 6 ? 6 : 4,
  }));

/**
 * Resolves the URL's host and returns the one address to connect to. Every address is checked, not
 * just the first: a host with one public and one private record would otherwise reach the private one
 * whenever the connection picks it. The caller connects to the returned address only (a pinned
 * lookup), so a DNS answer that changes between this check and the connect (rebinding) is never used.
 */
export async function resolveDestination(
  url: URL,
  policy: DestinationPolicy,
  resolveAll: ResolveAll = systemResolveAll,
): Promise<ResolvedAddress> {
  const host = url.hostname.replace(/^\[(.*)\]$/, '$1');
  let addresses: ResolvedAddress[];
  try {
    addresses = isIP(host) ? [{ address: host, family: isIP(host) === 6 ? 6 : 4 }] : await resolveAll(host);
  } catch (err) {
    throw new DestinationRefused(
      `the host ${host} does not resolve (${(err as NodeJS.ErrnoException).code ?? 'error'})`,
    );
  }
  if (addresses.length === 0) throw new DestinationRefused(`the host ${host} does not resolve`);
  if (policy.production && !policy.allowPrivateNetworks) {
    for (const { address } of addresses) {
      const range = refusedRange(address);
      if (range)
        throw new DestinationRefused(
          `the host ${host} resolves to ${address}, a ${range} address (refused in production unless WEBHOOK_ALLOW_PRIVATE_NETWORKS=1)`,
        );
    }
  }
  return addresses[0];
}

/** Creation-time check of an endpoint URL: the shape rules, then the addresses. */
export async function checkDestination(
  raw: string,
  policy: DestinationPolicy,
  resolveAll?: ResolveAll,
): Promise<ResolvedAddress> {
  return resolveDestination(parseDestinationUrl(raw), policy, resolveAll);
}

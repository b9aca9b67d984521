import { promises as dns } from 'node:dns';
import { BlockList, isIP } from 'node:net';

/** One address a host name resolves to. */
export interface ResolvedAddress {
  readonly address: string;
  readonly family: 4 | 6;
}

/** Resolves a host name to every address it has (injectable, so that tests send nothing off the machine). */
export type HostLookup = (hostname: string) => Promise<readonly ResolvedAddress[]>;

export const systemLookup: HostLookup = async (hostname) =>
  (await dns.lookup(hostname, { all: true, verbatim: true })).map((a) => ({
    address: a.address,
    family: a.family === 6 ? 6 : 4,
  }));

/**
 * Where a webhook may not go unless WEBHOOK_ALLOW_PRIVATE_URLS: this host and its neighbours, and whatever answers on
 * link-local addresses (cloud metadata services). Node's BlockList also matches an IPv4-mapped IPv6 address
 * (::ffff:10.0.0.1) against the IPv4 rules; translation prefixes that embed any IPv4 address are refused whole.
 */
const BLOCKED: readonly [string, number, 'ipv4' | 'ipv6', string][] = [
  ['0.0.0.0', 8, 'ipv4', 'this network'],
  ['10.0.0.0', 8, 'ipv4', 'private'],
  ['100.64.0.0', 10, 'ipv4', 'carrier-grade NAT'],
  ['127.0.0.0', 8, 'ipv4', 'loopback'],
  ['169.254.0.0', 16, 'ipv4', 'link-local (cloud metadata)'],
  ['172.16.0.0', 12, 'ipv4', 'private'],
  ['192.0.0.0', 24, 'ipv4', 'IETF protocol assignments'],
  ['192.168.0.0', 16, 'ipv4', 'private'],
  ['198.18.0.0', 15, 'ipv4', 'benchmarking'],
  ['224.0.0.0', 4, 'ipv4', 'multicast'],
  ['240.0.0.0', 4, 'ipv4', 'reserved'],
  ['::', 128, 'ipv6', 'unspecified'],
  ['::1', 128, 'ipv6', 'loopback'],
  ['64:ff9b::', 96, 'ipv6', 'NAT64'],
  ['64:ff9b:1::', 48, 'ipv6', 'NAT64'],
  ['2002::', 16, 'ipv6', '6to4'],
  ['2001::', 32, 'ipv6', 'Teredo'],
  ['fc00::', 7, 'ipv6', 'unique-local (fd00:ec2::254 is a metadata service)'],
  ['fe80::', 10, 'ipv6', 'link-local'],
  ['fec0::', 10, 'ipv6', 'site-local'],
  ['ff00::', 8, 'ipv6', 'multicast'],
];

/** "an unspecified", "an IETF", "a unique-local", "a loopback": by the first sound, not the first letter. */
const article = (words: string) => (/^(?:[aeio]|u(?!ni)|IETF)/i.test(words) ? 'an' : 'a');

const lists = BLOCKED.map(([network, prefix, type, why]) => {
  const list = new BlockList();
  list.addSubnet(network, prefix, type);
  return { list, why };
});

/** Why an address is not a public one, or null when it is. */
export function blockedBecause(address: string): string | null {
  const family = isIP(address);
  if (family === 0) return 'not an IP address';
  const type = family === 6 ? 'ipv6' : 'ipv4';
  return lists.find(({ list }) => list.check(address, type))?.why ?? null;
}

/** A URL's host without the brackets of an IPv6 literal. */
export const hostOf = (url: URL) => url.hostname.replace(/^\[(.*)\]$/, '$1');

export class RefusedTarget extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'RefusedTarget';
  }
}

/**
 * The one address check, at registration and again at every send (a name can resolve elsewhere by then: DNS
 * rebinding). Every address the name has must be public; the send then connects to the one checked, never
 * resolving again.
 */
export function createTargetGuard(opts: { lookup?: HostLookup; allowPrivate: boolean }) {
  const lookup = opts.lookup ?? systemLookup;
  return {
    /** The address to connect to; throws RefusedTarget when the host does not resolve or is not public. */
    async resolve(url: URL): Promise<ResolvedAddress> {
      const host = hostOf(url);
      const family = isIP(host);
      let addresses: readonly ResolvedAddress[];
      if (family !== 0) addresses = [{ address: host, family: family === 6 ? 6 : 4 }];
      else {
        try {
          addresses = await lookup(host);
        } catch {
          throw new RefusedTarget(`the host ${host} does not resolve`);
        }
        if (!addresses.length) throw new RefusedTarget(`the host ${host} does not resolve`);
      }
      if (!opts.allowPrivate) {
        for (const { address } of addresses) {
          const why = blockedBecause(address);
          if (why)
            throw new RefusedTarget(
              `resolves to ${address}, ${article(why)} ${why} address, which webhooks may not call`,
            );
        }
      }
      return addresses[0]!;
    },

    /** The domain's check at registration: a reason to refuse, or null. */
    async refusal(url: URL): Promise<string | null> {
      // Private targets allowed means no check at all: nothing is resolved at registration then.
      if (opts.allowPrivate) return null;
      try {
        await this.resolve(url);
        return null;
      } catch (error) {
        if (error instanceof RefusedTarget) return error.message;
        throw error;
      }
    },
  };
}

export type TargetGuard = ReturnType<typeof createTargetGuard>;

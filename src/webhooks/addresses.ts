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
 * link-local addresses (cloud metadata services). IPv6 forms that carry an IPv4 address are judged by that address
 * (EMBEDDED below) before these ranges.
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
  // Local-use NAT64 (RFC 8215): the operator picks where the IPv4 address sits, so it cannot be read back.
  ['64:ff9b:1::', 48, 'ipv6', 'local-use NAT64'],
  ['fc00::', 7, 'ipv6', 'unique-local (fd00:ec2::254 is a metadata service)'],
  ['fe80::', 10, 'ipv6', 'link-local'],
  ['fec0::', 10, 'ipv6', 'site-local'],
  ['ff00::', 8, 'ipv6', 'multicast'],
];

const ipv4Of = (high: number, low: number) => `${high >> 8}.${high & 255}.${low >> 8}.${low & 255}`;
const last32 = (h: readonly number[]) => [ipv4Of(h[6]!, h[7]!)];

/**
 * IPv6 forms that carry an IPv4 address, and where it sits: a packet to one of them reaches that IPv4 address (on
 * this host's stack, or through a translator or relay), so each is allowed only when every embedded address is.
 * ::/96 comes after ::1 and :: are refused above. Teredo carries the server and the client (bits inverted).
 */
const EMBEDDED: readonly [string, number, string, (h: readonly number[]) => string[]][] = [
  ['::ffff:0:0', 96, 'IPv4-mapped', last32],
  ['::ffff:0:0:0', 96, 'IPv4-translated (SIIT)', last32],
  ['::', 96, 'IPv4-compatible', last32],
  ['64:ff9b::', 96, 'NAT64', last32],
  ['2002::', 16, '6to4', (h) => [ipv4Of(h[1]!, h[2]!)]],
  ['2001::', 32, 'Teredo', (h) => [ipv4Of(h[2]!, h[3]!), ipv4Of(h[6]! ^ 0xffff, h[7]! ^ 0xffff)]],
];

/** "an unspecified", "an IETF", "a unique-local", "a loopback": by the first sound, not the first letter. */
const article = (words: string) => (/^(?:[aeio]|u(?!ni)|IETF)/i.test(words) ? 'an' : 'a');

const inSubnet = (network: string, prefix: number, type: 'ipv4' | 'ipv6') => {
  const list = new BlockList();
  list.addSubnet(network, prefix, type);
  return list;
};
const lists = BLOCKED.map(([network, prefix, type, why]) => ({ list: inSubnet(network, prefix, type), type, why }));
const embeddings = EMBEDDED.map(([network, prefix, form, carried]) => ({
  list: inSubnet(network, prefix, 'ipv6'),
  form,
  carried,
}));

/**
 * The eight 16-bit groups of an IPv6 address. The WHATWG URL parser (Node's own) validates it and writes it in its
 * canonical form: lower-case hex only (a dotted IPv4 tail is converted) with one `::` at most, left to expand here.
 */
function groupsOf(address: string): number[] {
  const canonical = new URL(`http://[${address}]/`).hostname.slice(1, -1);
  const [head = '', tail] = canonical.split('::');
  const part = (s: string) => (s === '' ? [] : s.split(':').map((g) => parseInt(g, 16)));
  if (tail === undefined) return part(head);
  const [before, after] = [part(head), part(tail)];
  return [...before, ...Array<number>(8 - before.length - after.length).fill(0), ...after];
}

/**
 * Why an address is not a public one, as a phrase ("a loopback address", "the IPv4-compatible form of 127.0.0.1, a
 * loopback address"), or null when it is.
 */
export function blockedBecause(address: string): string | null {
  const family = isIP(address);
  if (family === 0) return 'not an IP address';
  const type = family === 6 ? 'ipv6' : 'ipv4';
  // Only the rules of the address's own family: BlockList would also match an IPv4-mapped address to IPv4 rules.
  const why = lists.find((rule) => rule.type === type && rule.list.check(address, type))?.why;
  if (why) return `${article(why)} ${why} address`;
  const embedding = family === 6 ? embeddings.find(({ list }) => list.check(address, 'ipv6')) : undefined;
  for (const carried of embedding?.carried(groupsOf(address)) ?? []) {
    const inner = blockedBecause(carried);
    if (inner) return `the ${embedding!.form} form of ${carried}, ${inner}`;
  }
  return null;
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
          if (why) throw new RefusedTarget(`resolves to ${address}, ${why}, which webhooks may not call`);
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

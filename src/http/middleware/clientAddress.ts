import type { IncomingMessage } from 'node:http';
import proxyaddr from 'proxy-addr';
import type { TrustProxy } from '../../config/index.js';

/** Which hops TRUST_PROXY trusts, as Express's `trust proxy` compiles it: (address, hop index) → trusted. */
export type ProxyTrust = (address: string, hop: number) => boolean;

/** TRUST_PROXY as proxy-addr (Express's own) reads it: a boolean, a hop count, or addresses and subnets. */
export function proxyTrust(setting: TrustProxy): ProxyTrust {
  if (setting === true) return () => true;
  if (setting === false) return () => false;
  if (typeof setting === 'number') return (_address, hop) => hop < setting;
  return proxyaddr.compile([...setting]);
}

/** The socket's peer, an IPv4-mapped IPv6 address read as the IPv4 one. */
export function peerAddress(address: string | undefined): string | undefined {
  return address?.startsWith('::ffff:') ? address.slice(7) : address;
}

/**
 * The client address of a request read off the HTTP server itself (an upgrade, before Express), by the same rules
 * as Express's `req.ip`: the peer, or the X-Forwarded-For entry that the nearest untrusted hop added.
 */
export function clientIp(req: IncomingMessage, trust: ProxyTrust): string {
  if (!req.socket.remoteAddress) return 'unknown';
  return peerAddress(proxyaddr(req, trust))!;
}

/** Whether a connection comes from a proxy TRUST_PROXY trusts, whose connections carry many clients' requests. */
export const isTrustedPeer = (trust: ProxyTrust, address: string) => trust(address, 0);

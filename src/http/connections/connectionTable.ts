import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { performance } from 'node:perf_hooks';
import { rawProblem, RETRY_LATER } from '../problems/index.js';

/** How long a refused connection may stay to read our answer and close its side, before it is closed for it. */
const REFUSED_LINGER_MS = 2_000;

/** One accepted connection: who holds it, and whether a request is open on it. */
export interface Connection {
  readonly socket: Socket;
  readonly address: string;
  /** Requests read on it and not yet answered (more than one only when a client pipelines). */
  open: number;
  /** The request being answered, while one is open. */
  current: { readonly req: IncomingMessage; readonly res: ServerResponse } | undefined;
  /** performance.now() when it was accepted or its last response finished. */
  idleSince: number;
  /** Whether a response has finished on it: only such a connection, waiting for its next request, is kept alive. */
  served: boolean;
}

/**
 * The peer address a connection is counted under. Before a request is read there is no header to go by, and one
 * connection from a balancer carries requests of many clients: so it is the socket's own remote address (an
 * IPv4-mapped IPv6 address counted as the IPv4 one), not the client address TRUST_PROXY gives a request.
 */
function peerAddress(socket: Socket): string | undefined {
  const address = socket.remoteAddress;
  return address?.startsWith('::ffff:') ? address.slice(7) : address;
}

/** Every trusted proxy's connections are counted under this one key, against the replica-wide budget. */
const PROXIES = Symbol('trusted proxies');
type Key = string | typeof PROXIES;

/**
 * Every connection the HTTP server accepts, counted per peer: an untrusted peer address up to `maxPerAddress`, and
 * the peers `isTrustedProxy` names (balancers, whose connections carry many clients) all together up to
 * `maxProxyConnections`. At a bound, the holder's oldest idle keep-alive connection is closed to make room; with
 * none idle, the new connection is answered 503 problem details at once and closed, before it can hold anything.
 * Tracks which connections have a request open, for the drain.
 */
export function connectionTable(
  server: Server,
  opts: {
    maxPerAddress: number;
    maxProxyConnections: number;
    isTrustedProxy: (address: string) => boolean;
    onRefused?: () => void;
  },
) {
  const connections = new Map<Socket, Connection>();
  /** Each holder's connections, in the order they were accepted. */
  const byKey = new Map<Key, Set<Connection>>();
  const refused = new WeakSet<Socket>();
  const upgraded = new WeakSet<Socket>();
  let lastAccepted = performance.now();

  const release = (key: Key, connection: Connection) => {
    if (!connections.delete(connection.socket)) return;
    const held = byKey.get(key)!;
    held.delete(connection);
    if (!held.size) byKey.delete(key);
  };

  /** The holder's idle keep-alive connection that has waited longest, closed to make room; false if none is. */
  const closeOldestIdle = (key: Key): boolean => {
    let oldest: Connection | undefined;
    for (const c of byKey.get(key) ?? []) {
      // One that never sent a request is not kept alive but slow (or hostile): it keeps its place and its bounds.
      if (c.open > 0 || !c.served || upgraded.has(c.socket)) continue;
      if (!oldest || c.idleSince < oldest.idleSince) oldest = c;
    }
    if (!oldest) return false;
    // As Node's closeIdleConnections does: nothing is in flight on it, and a client resends on a fresh connection.
    release(key, oldest);
    oldest.socket.destroy();
    return true;
  };

  server.on('connection', (socket: Socket) => {
    lastAccepted = performance.now();
    const address = peerAddress(socket);
    // Closed before it could be counted: nothing to hold.
    if (address === undefined) return;
    const key: Key = opts.isTrustedProxy(address) ? PROXIES : address;
    const max = key === PROXIES ? opts.maxProxyConnections : opts.maxPerAddress;
    if ((byKey.get(key)?.size ?? 0) >= max && !closeOldestIdle(key)) return refuse(socket, key);
    const connection: Connection = {
      socket,
      address,
      open: 0,
      current: undefined,
      idleSince: lastAccepted,
      served: false,
    };
    connections.set(socket, connection);
    let held = byKey.get(key);
    if (!held) byKey.set(key, (held = new Set()));
    held.add(connection);
    socket.once('close', () => release(key, connection));
  });

  function refuse(socket: Socket, key: Key) {
    refused.add(socket);
    opts.onRefused?.();
    // Answered before any request, as servers answer an idle timeout: a client that has sent (or then sends) its
    // request reads this answer to it. Our side closes now; theirs is read and discarded until they close it.
    socket.end(
      rawProblem(
        'TOO_MANY_CONNECTIONS',
        key === PROXIES
          ? `The trusted proxies already hold ${opts.maxProxyConnections} connections to this replica.`
          : `This client address already holds ${opts.maxPerAddress} connections to this server.`,
        '/',
        RETRY_LATER,
      ),
    );
    const linger = setTimeout(() => socket.destroy(), REFUSED_LINGER_MS).unref();
    socket.once('close', () => clearTimeout(linger));
  }

  return {
    connections: connections as ReadonlyMap<Socket, Connection>,
    /** performance.now() when the server last accepted a connection. */
    lastAccepted: () => lastAccepted,
    /** True for a connection refused over the cap: it was already answered, and nothing read on it is served. */
    isRefused: (socket: Socket) => refused.has(socket),
    /** A connection handed to the WebSocket server: it still counts for its address, but it is no longer HTTP's. */
    upgrade: (socket: Socket) => void upgraded.add(socket),
    isUpgraded: (socket: Socket) => upgraded.has(socket),
    /** Records a request read on its connection, until its response is done; undefined when it is not counted. */
    opened(req: IncomingMessage, res: ServerResponse): Connection | undefined {
      const connection = connections.get(req.socket);
      if (!connection) return undefined;
      connection.open++;
      connection.current = { req, res };
      res.once('close', () => {
        connection.open--;
        if (connection.current?.res === res) connection.current = undefined;
        connection.served = true;
        if (connection.open === 0) connection.idleSince = performance.now();
      });
      return connection;
    },
  };
}

export type ConnectionTable = ReturnType<typeof connectionTable>;

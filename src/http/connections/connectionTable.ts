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

/**
 * Every connection the HTTP server accepts, counted per peer address: past `maxPerAddress`, a new connection is
 * answered 503 problem details at once and closed, before it can hold anything. Tracks which connections have a
 * request open, for the drain.
 */
export function connectionTable(server: Server, opts: { maxPerAddress: number; onRefused?: () => void }) {
  const connections = new Map<Socket, Connection>();
  const perAddress = new Map<string, number>();
  const refused = new WeakSet<Socket>();
  const upgraded = new WeakSet<Socket>();
  let lastAccepted = performance.now();

  server.on('connection', (socket: Socket) => {
    lastAccepted = performance.now();
    const address = peerAddress(socket);
    // Closed before it could be counted: nothing to hold.
    if (address === undefined) return;
    const held = perAddress.get(address) ?? 0;
    if (held >= opts.maxPerAddress) return refuse(socket);
    perAddress.set(address, held + 1);
    connections.set(socket, { socket, address, open: 0, current: undefined, idleSince: lastAccepted });
    socket.once('close', () => {
      connections.delete(socket);
      const left = perAddress.get(address)! - 1;
      if (left > 0) perAddress.set(address, left);
      else perAddress.delete(address);
    });
  });

  function refuse(socket: Socket) {
    refused.add(socket);
    opts.onRefused?.();
    // Answered before any request, as servers answer an idle timeout: a client that has sent (or then sends) its
    // request reads this answer to it. Our side closes now; theirs is read and discarded until they close it.
    socket.end(
      rawProblem(
        'TOO_MANY_CONNECTIONS',
        `This client address already holds ${opts.maxPerAddress} connections to this server.`,
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
        if (connection.open === 0) connection.idleSince = performance.now();
      });
      return connection;
    },
  };
}

export type ConnectionTable = ReturnType<typeof connectionTable>;

import type { Server } from 'node:http';
import { Server as NetServer, type Socket } from 'node:net';
import { performance } from 'node:perf_hooks';
import type { ConnectionTable } from './connectionTable.js';

/**
 * How long a connection must have been idle (or open without a request) before the drain closes it, and how long
 * the listener must have accepted nothing before it closes: a request the client sent just before would otherwise
 * cross our close on the wire and meet a reset.
 */
const DRAIN_IDLE_GRACE_MS = 250;
/**
 * The longest the listener stays open once the drain has begun, however steadily connections keep arriving. Node
 * (libuv 1.52) accepts one queued connection per turn of the event loop, so a busy replica can take seconds to
 * empty its listen backlog: measured, 100 connections queued behind 200 keyed POSTs took over 2 s.
 */
const ACCEPT_WINDOW_MS = 5_000;
const TICK_MS = 50;

export interface DrainOutcome {
  /** Connections still open at the timeout, which were then cut. */
  readonly cut: number;
}

/**
 * Drains the HTTP server without resetting a request that reached it. The caller has already made every response
 * close its connection (`Connection: close`), so each connection ends on its own once its request is answered, and
 * a request that arrives meanwhile on a kept-alive connection is served, then its connection ends. Connections with
 * nothing to answer are closed once they have been idle for the grace (a FIN, read until the client closes its side).
 *
 * The listener stays open until it has accepted nothing for the grace over two checks, so that at least one turn of
 * the loop found the backlog empty (at most `acceptWindowMs`): a connection the kernel has already accepted (in the
 * listen backlog, which the signal can overtake) is served rather than reset. It
 * is net.Server's close, not http.Server's, which would also destroy every idle kept-alive connection at once and
 * reset a request already on its way on one of them. From then on a new connection is refused (ECONNREFUSED), which
 * a balancer retries on another replica whatever the method, since nothing was sent. Every check runs after the
 * event loop's poll phase (setImmediate), so bytes that have already arrived are read, and their request counted,
 * before a connection is judged idle. After `timeoutMs`, whatever is left is cut.
 */
export function drainConnections(
  server: Server,
  table: ConnectionTable,
  opts: { timeoutMs: number; graceMs?: number; acceptWindowMs?: number; onListenerClosed?: () => void },
): Promise<DrainOutcome> {
  const grace = opts.graceMs ?? DRAIN_IDLE_GRACE_MS;
  const started = performance.now();
  const deadline = started + opts.timeoutMs;
  const acceptUntil = started + (opts.acceptWindowMs ?? ACCEPT_WINDOW_MS);
  const ending = new Map<Socket, number>();
  // What the previous check saw: a connection counts as idle only when two checks in a row saw it idle since the
  // same moment, so that a poll phase has run in between (one busy iteration can outlast the grace by itself).
  let idleBefore = new Map<Socket, number>();
  let acceptedBefore: number | undefined;
  return new Promise((resolve) => {
    let listening = true;
    const tick = () => {
      const now = performance.now();
      const idleNow = new Map<Socket, number>();
      for (const connection of table.connections.values()) {
        const { socket, idleSince } = connection;
        if (table.isUpgraded(socket) || connection.open > 0) continue;
        idleNow.set(socket, idleSince);
        if (idleBefore.get(socket) !== idleSince || now - idleSince < grace) continue;
        const endedAt = ending.get(socket);
        if (endedAt === undefined) {
          ending.set(socket, now);
          socket.end();
        } else if (now - endedAt >= grace) {
          // Our FIN went out a grace ago and the client has not closed its side: nothing is left to read.
          socket.destroy();
        }
      }
      idleBefore = idleNow;
      const lastAccepted = table.lastAccepted();
      const quiet = acceptedBefore === lastAccepted && now - lastAccepted >= grace;
      if (listening && (quiet || now >= acceptUntil)) {
        listening = false;
        // Its timer of request timeouts, which http.Server's close also stops, is unref'd: it ends with the process.
        NetServer.prototype.close.call(server);
        opts.onListenerClosed?.();
      }
      acceptedBefore = lastAccepted;
      if (!listening && table.connections.size === 0) return resolve({ cut: 0 });
      if (now >= deadline) {
        const cut = table.connections.size;
        for (const { socket } of table.connections.values()) socket.destroy();
        server.closeAllConnections();
        if (listening) NetServer.prototype.close.call(server);
        return resolve({ cut });
      }
      setTimeout(() => setImmediate(tick), TICK_MS);
    };
    setImmediate(tick);
  });
}

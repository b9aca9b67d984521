import type { Server } from 'node:http';
import type { Socket } from 'node:net';
import { performance } from 'node:perf_hooks';
import type { ConnectionTable } from './connectionTable.js';

/**
 * How long a connection must have been idle (or open without a request) before the drain closes it, and how long
 * the listener must have accepted nothing before it closes: a request the client sent just before would otherwise
 * cross our close on the wire and meet a reset.
 */
const DRAIN_IDLE_GRACE_MS = 250;
const TICK_MS = 50;

export interface DrainOutcome {
  /** Connections still open at the timeout, which were then cut. */
  readonly cut: number;
}

/**
 * Drains the HTTP server without resetting a request that reached it. The caller has already made every response
 * close its connection and every new request answer 503: so each connection ends on its own once its request is
 * answered. Connections with nothing to answer are closed once they have been idle for the grace (a FIN, read until
 * the client closes its side). The listener stays open meanwhile, so a connection the kernel has already accepted
 * (in the listen backlog) is served rather than reset; it closes once no connection is left and none arrived for the
 * grace, and from then on a new connection is refused. Every check runs after the event loop's poll phase
 * (setImmediate), so bytes that have already arrived are read, and their request counted, before a connection is
 * judged idle. After `timeoutMs`, whatever is left is cut.
 */
export function drainConnections(
  server: Server,
  table: ConnectionTable,
  opts: { timeoutMs: number; graceMs?: number },
): Promise<DrainOutcome> {
  const grace = opts.graceMs ?? DRAIN_IDLE_GRACE_MS;
  const deadline = performance.now() + opts.timeoutMs;
  const ending = new Map<Socket, number>();
  // What the previous check saw: a connection counts as idle only when two checks in a row saw it idle since the
  // same moment, so that a poll phase has run in between (one busy iteration can outlast the grace by itself).
  let idleBefore = new Map<Socket, number>();
  let emptyBefore: number | undefined;
  return new Promise((resolve) => {
    let listening = true;
    let closed = false;
    const tick = () => {
      if (closed) return;
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
      const empty = table.connections.size === 0 ? lastAccepted : undefined;
      if (listening && empty !== undefined && emptyBefore === empty && now - lastAccepted >= grace) {
        listening = false;
        server.close(() => {
          closed = true;
          resolve({ cut: 0 });
        });
      }
      emptyBefore = empty;
      if (now >= deadline) {
        closed = true;
        const cut = table.connections.size;
        for (const { socket } of table.connections.values()) socket.destroy();
        server.closeAllConnections();
        if (listening) server.close();
        resolve({ cut });
        return;
      }
      setTimeout(() => setImmediate(tick), TICK_MS);
    };
    setImmediate(tick);
  });
}

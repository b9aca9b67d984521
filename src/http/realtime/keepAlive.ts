import type { WebSocket } from 'ws';

/** The connections are pinged in this many turns spread over the period, so no turn pings them all at once. */
const KEEPALIVE_TURNS = 10;

/**
 * The keep-alive of every connection with one timer: connection i is pinged in turn i % KEEPALIVE_TURNS, and
 * terminated at its next turn if no pong came back. One shared `pong` listener, no timer or closure per socket.
 * Each connection is pinged once per `periodMs` (WS_KEEPALIVE_S) and closed if it has not answered the previous ping
 * by then: a dead peer is found within two periods; an idle proxy (nginx's proxy_read_timeout, deploy/nginx.conf)
 * sees traffic.
 */
export function keepAlive(periodMs: number, onDead: (socket: WebSocket) => void) {
  const turns = Array.from({ length: KEEPALIVE_TURNS }, () => new Set<WebSocket>());
  /** Sockets pinged that have not answered yet. */
  const waiting = new WeakSet<WebSocket>();
  function answered(this: WebSocket) {
    waiting.delete(this);
  }
  let added = 0;
  let turn = 0;
  let timer: NodeJS.Timeout | undefined;
  const tick = () => {
    for (const socket of turns[turn]!) {
      if (socket.readyState !== socket.OPEN) continue;
      if (waiting.has(socket)) onDead(socket);
      else {
        waiting.add(socket);
        socket.ping();
      }
    }
    turn = (turn + 1) % KEEPALIVE_TURNS;
  };
  return {
    add(socket: WebSocket) {
      turns[added++ % KEEPALIVE_TURNS]!.add(socket);
      socket.on('pong', answered);
      if (!timer) {
        timer = setInterval(tick, periodMs / KEEPALIVE_TURNS);
        timer.unref();
      }
    },
    delete(socket: WebSocket) {
      for (const set of turns) set.delete(socket);
    },
    stop: () => clearInterval(timer),
  };
}

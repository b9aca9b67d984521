import { createClient } from 'graphql-ws';
import WebSocket from 'ws';

export const ORDER_CREATED = 'subscription { orderCreated { id } }';

export interface Closed {
  code: number;
  reason: string;
}

/**
 * A raw graphql-transport-ws socket with optional cookie: resolves `closed` with the server's close code.
 * `autoPong: false` makes a peer that never answers the server's pings.
 */
export function rawSocket(
  url: string,
  headers: Record<string, string> = {},
  /** localAddress: the client address a test connects from (127.0.0.0/8 on loopback). */
  opts: { autoPong?: boolean; localAddress?: string } = {},
) {
  const socket = new WebSocket(`${url.replace(/^http/, 'ws')}/graphql`, 'graphql-transport-ws', { headers, ...opts });
  const opened = new Promise<number>((resolve) => {
    socket.on('open', () => resolve(101));
    socket.on('unexpected-response', (_req, res) => resolve(res.statusCode ?? 0));
    socket.on('error', () => undefined);
  });
  const closed = new Promise<Closed>((resolve) =>
    socket.on('close', (code, reason) => resolve({ code, reason: reason.toString() })),
  );
  const messages: { type: string; id?: string; payload?: unknown }[] = [];
  const waiters: (() => void)[] = [];
  socket.on('message', (data) => {
    messages.push(JSON.parse(String(data)) as (typeof messages)[number]);
    for (const w of waiters.splice(0)) w();
  });
  const until = async (pred: (m: (typeof messages)[number]) => boolean) => {
    for (;;) {
      const found = messages.find(pred);
      if (found) return found;
      await new Promise<void>((r) => waiters.push(r));
    }
  };
  return {
    socket,
    opened,
    closed,
    messages,
    send: (message: object) => socket.send(JSON.stringify(message)),
    /** connection_init, then waits for the ack. */
    async init(payload: Record<string, unknown> = {}) {
      if ((await opened) !== 101) throw new Error('the handshake was refused');
      socket.send(JSON.stringify({ type: 'connection_init', payload }));
      await until((m) => m.type === 'connection_ack');
    },
    until,
  };
}

/** A graphql-ws client that authenticates with a browser session cookie on the handshake, as a browser would. */
export function cookieClient(url: string, cookie: string) {
  let resolveClosed: (c: Closed) => void = () => undefined;
  const closed = new Promise<Closed>((r) => (resolveClosed = r));
  class CookieSocket extends WebSocket {
    constructor(address: string, protocols?: string | string[]) {
      super(address, protocols, { headers: { cookie } });
    }
  }
  const client = createClient({
    url: `${url.replace(/^http/, 'ws')}/graphql`,
    webSocketImpl: CookieSocket,
    lazy: false,
    retryAttempts: 0,
    onNonLazyError: () => undefined,
    on: { closed: (event) => resolveClosed(event as Closed) },
  });
  const connected = new Promise<void>((resolve) => client.on('connected', () => resolve()));
  return { client, closed, connected };
}

/**
 * A graphql-sse stream (distinct-connections mode) over fetch. `opened` resolves with the response once the
 * server has answered; `text` with everything the stream carried once it ends.
 */
export async function sseStream(url: string, headers: Record<string, string>, query = ORDER_CREATED) {
  const controller = new AbortController();
  const res = await fetch(`${url}/graphql/stream`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'text/event-stream', ...headers },
    body: JSON.stringify({ query }),
    signal: controller.signal,
  });
  // A stream cut off (by us or by the server shutting down) resolves empty: nothing waits on it unhandled.
  const text = res.text().catch(() => '');
  return { res, text, close: () => controller.abort() };
}

/** Rejects unless `promise` settles within `ms`: a bound the issue promises, not a measurement. */
export function within<T>(ms: number, what: string, promise: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout;
  return Promise.race([
    promise.finally(() => clearTimeout(timer)),
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${what} did not happen within ${ms} ms`)), ms);
    }),
  ]);
}

/**
 * A graphql-sse subscription (distinct-connections mode, GET as EventSource sends it) that does what a browser's
 * EventSource does when its stream ends: connects again with `Last-Event-ID` set to the last `id:` it saw, until
 * `close()`. `ids` are the orders delivered (`orderCreated.id`), in arrival order, replays included.
 */
export function resumableSse(url: string, headers: Record<string, string>, query = ORDER_CREATED) {
  const controller = new AbortController();
  const ids: string[] = [];
  const reconnects: { lastEventId: string | undefined; status: number | string }[] = [];
  const waiters: (() => void)[] = [];
  let lastEventId: string | undefined;
  let closed = false;
  const handle = (block: string) => {
    const lines = block.split('\n');
    const id = lines.find((l) => l.startsWith('id: '))?.slice(4);
    const data = lines.find((l) => l.startsWith('data: '))?.slice(6);
    if (!lines.includes('event: next') || !data) return;
    const parsed = JSON.parse(data) as { data?: { orderCreated?: { id: string } } };
    if (parsed.data?.orderCreated) ids.push(parsed.data.orderCreated.id);
    if (id) lastEventId = id;
    for (const w of waiters.splice(0)) w();
  };
  const loop = async () => {
    for (let attempt = 0; !closed; attempt++) {
      let status: number | string = 'error';
      try {
        const res = await fetch(`${url}/graphql/stream?query=${encodeURIComponent(query)}`, {
          headers: {
            accept: 'text/event-stream',
            ...headers,
            ...(lastEventId ? { 'last-event-id': lastEventId } : {}),
          },
          signal: controller.signal,
        });
        status = res.status;
        if (attempt > 0) reconnects.push({ lastEventId, status });
        if (res.status === 200 && res.body) {
          const decoder = new TextDecoder();
          let buffer = '';
          for await (const chunk of res.body) {
            buffer += decoder.decode(chunk as Uint8Array, { stream: true });
            for (let end = buffer.indexOf('\n\n'); end >= 0; end = buffer.indexOf('\n\n')) {
              handle(buffer.slice(0, end));
              buffer = buffer.slice(end + 2);
            }
          }
          continue;
        }
        await res.body?.cancel();
      } catch (error) {
        if (closed) return;
        if (attempt > 0 && status === 'error') reconnects.push({ lastEventId, status: String(error) });
      }
      // Refused or cut before it answered (no replica ready behind the balancer): EventSource's retry delay.
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  };
  const running = loop();
  return {
    ids,
    reconnects,
    /** Resolves once `predicate(ids)` holds. */
    async until(predicate: (ids: readonly string[]) => boolean) {
      while (!predicate(ids)) {
        if (closed) throw new Error(`the stream was closed with ${ids.length} orders received`);
        await new Promise<void>((resolve) => waiters.push(resolve));
      }
    },
    async close() {
      closed = true;
      controller.abort();
      for (const w of waiters.splice(0)) w();
      await running;
    },
  };
}

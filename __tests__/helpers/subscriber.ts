import { createClient, type Client } from 'graphql-ws';
import WebSocket from 'ws';

export interface Received {
  data?: Record<string, unknown> | null;
  extensions?: { eventId?: string };
  errors?: { message: string; extensions?: { code?: string } }[];
}

/** A graphql-ws client for tests: collects what a subscription delivers, and how the socket closed. */
export function subscriber(url: string, token?: string) {
  let closed: { code: number; reason: string } | null = null;
  const closeWaiters: ((c: { code: number; reason: string }) => void)[] = [];
  const client: Client = createClient({
    url: url.replace(/^http/, 'ws') + '/graphql',
    webSocketImpl: WebSocket,
    lazy: false,
    retryAttempts: 0,
    connectionParams: token ? { authorization: `Bearer ${token}` } : {},
    on: {
      closed: (event) => {
        const { code, reason } = event as { code: number; reason: string };
        closed = { code, reason: String(reason) };
        for (const w of closeWaiters.splice(0)) w(closed);
      },
    },
    onNonLazyError: () => undefined,
  });

  return {
    client,
    /** Subscribes; `received` fills as events arrive, `next(n)` waits for the n-th. */
    subscribe(query: string, variables: Record<string, unknown> = {}) {
      const received: Received[] = [];
      const waiters: { n: number; resolve: () => void }[] = [];
      let ended: (() => void) | null = null;
      const done = new Promise<void>((resolve) => (ended = resolve));
      const record = (value: Received) => {
        received.push(value);
        for (const w of waiters.filter((w) => received.length >= w.n)) {
          waiters.splice(waiters.indexOf(w), 1);
          w.resolve();
        }
      };
      const dispose = client.subscribe(
        { query, variables },
        {
          next: (value) => record(value as Received),
          error: (error) => {
            record({ errors: Array.isArray(error) ? error : [{ message: String(error) }] });
            ended!();
          },
          complete: () => ended!(),
        },
      );
      return {
        received,
        done,
        dispose,
        next: (n: number) =>
          received.length >= n ? Promise.resolve() : new Promise<void>((resolve) => waiters.push({ n, resolve })),
      };
    },
    /** Resolves with the close code and reason once the server closes the socket. */
    closed: () =>
      closed ? Promise.resolve(closed) : new Promise<{ code: number; reason: string }>((r) => closeWaiters.push(r)),
    /** Waits until the connection is acknowledged, so later events are not missed. */
    connected: () => new Promise<void>((resolve) => client.on('connected', () => resolve())),
    dispose: () => client.dispose(),
  };
}

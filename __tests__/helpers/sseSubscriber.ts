import { createClient } from 'graphql-sse';

export interface SseEvent<Data = Record<string, unknown>> {
  data?: Data;
  extensions?: { eventId?: string };
  errors?: { extensions?: { code?: string } }[];
}

/**
 * One subscription through graphql-sse's own client, collecting what it delivers (an error as an event with
 * `errors`); `next(n)` waits for the n-th event, `ended` for its end. `lastEventId` resumes, as a reconnecting client would.
 */
export function sseSubscriber<Data = Record<string, unknown>>(
  url: string,
  token: string,
  query: string,
  opts: { singleConnection?: boolean; lastEventId?: string } = {},
) {
  const client = createClient({
    url: `${url}/graphql/stream`,
    singleConnection: opts.singleConnection ?? false,
    retryAttempts: 0,
    headers: { authorization: `Bearer ${token}`, ...(opts.lastEventId ? { 'last-event-id': opts.lastEventId } : {}) },
  });
  const received: SseEvent<Data>[] = [];
  let end: (how: string) => void = () => undefined;
  const ended = new Promise<string>((resolve) => (end = resolve));
  const waiters: { n: number; resolve: () => void }[] = [];
  const record = (event: SseEvent<Data>) => {
    received.push(event);
    for (const w of waiters.filter((w) => received.length >= w.n)) {
      waiters.splice(waiters.indexOf(w), 1);
      w.resolve();
    }
  };
  const dispose = client.subscribe(
    { query },
    {
      next: (value) => record(value as SseEvent<Data>),
      error: (error) => {
        record({ errors: [{ extensions: { code: String(error) } }] });
        end(String(error));
      },
      complete: () => end('complete'),
    },
  );
  return {
    received,
    /** Resolves once the subscription is over: `complete`, or the error that ended it (the stream cut off). */
    ended,
    next: (n: number) =>
      received.length >= n ? Promise.resolve() : new Promise<void>((r) => waiters.push({ n, resolve: r })),
    close: () => {
      dispose();
      client.dispose();
    },
  };
}

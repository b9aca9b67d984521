import { createClient, type ClientOptions, type ExecutionResult, type RequestParams, type Sink } from 'graphql-sse';

/**
 * A graphql-sse subscription that resumes where it left off when its stream drops. The client never sends
 * Last-Event-ID by itself; every event carries its id in `extensions.eventId` (also its SSE `id:` line), so the last
 * one is remembered and sent from the `headers` function, which graphql-sse calls on every (re)connect. The server
 * then sends the events missed since (kept 24 hours), then live ones, on any replica.
 */
export function resumingSubscription<Data>(
  options: Omit<ClientOptions<false>, 'headers' | 'singleConnection'> & { token: () => Promise<string> },
  request: RequestParams,
  sink: Sink<ExecutionResult<Data, { eventId?: string }>>,
): () => void {
  const { token, ...rest } = options;
  let lastEventId: string | undefined;
  const client = createClient({
    ...rest,
    // Last-Event-ID resumes in distinct-connections mode, one stream per subscription.
    singleConnection: false,
    headers: async () => ({
      authorization: `Bearer ${await token()}`,
      ...(lastEventId ? { 'last-event-id': lastEventId } : {}),
    }),
  });
  const stop = client.subscribe<Data, { eventId?: string }>(request, {
    next(result) {
      lastEventId = result.extensions?.eventId ?? lastEventId;
      sink.next(result);
    },
    error: (error) => sink.error(error),
    complete: () => sink.complete(),
  });
  return () => {
    stop();
    client.dispose();
  };
}

import type { Client, FormattedExecutionResult, Sink, SubscribePayload } from 'graphql-ws';

/**
 * A graphql-ws subscription that resumes where it left off when its connection drops (a replica that shuts down
 * closes with 1001, which graphql-ws retries on its own). Every event carries its id in `extensions.eventId`; the
 * last one is kept in the subscribe payload's `extensions.lastEventId`, and graphql-ws sends that same payload
 * object again when it reconnects and subscribes anew. The replica it reaches then sends the events missed since
 * (kept 24 hours), then live ones. The client needs `retryAttempts` above 0 (graphql-ws's default is 5).
 */
export function resumingWsSubscription<Data>(
  client: Client,
  request: SubscribePayload,
  sink: Sink<FormattedExecutionResult<Data, { eventId?: string }>>,
): () => void {
  const extensions: Record<string, unknown> = { ...request.extensions };
  const payload: SubscribePayload = { ...request, extensions };
  return client.subscribe<Data, { eventId?: string }>(payload, {
    next(result) {
      if (result.extensions?.eventId) extensions.lastEventId = result.extensions.eventId;
      sink.next(result);
    },
    error: (error) => sink.error(error),
    complete: () => sink.complete(),
  });
}

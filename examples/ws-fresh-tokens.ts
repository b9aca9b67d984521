import {
  createClient,
  type ClientOptions,
  type FormattedExecutionResult,
  type Sink,
  type SubscribePayload,
} from 'graphql-ws';

/** The server's close when the access token of a connection expires. */
const EXPIRED = { code: 4401, reason: 'The access token has expired.' };

/**
 * Subscriptions over WebSocket that outlive access tokens. `connectionParams` is a function, so every connection
 * sends the token that is current then. When the token expires, the server closes with 4401, which graphql-ws treats
 * as fatal whatever `shouldRetry` says (enisdenjo/graphql-ws#558): the subscription is then started again, on a new
 * connection with a fresh token. Events published in that gap are not replayed over WebSocket; SSE can resume.
 */
export function freshTokenClient(options: Omit<ClientOptions, 'connectionParams'> & { token: () => Promise<string> }) {
  const { token, ...rest } = options;
  const client = createClient({
    ...rest,
    connectionParams: async () => ({ authorization: `Bearer ${await token()}` }),
  });
  function subscribe<Data>(payload: SubscribePayload, sink: Sink<FormattedExecutionResult<Data, unknown>>): () => void {
    let stopped = false;
    let stop = () => {};
    const start = () => {
      stop = client.subscribe<Data>(payload, {
        next: (result) => sink.next(result),
        complete: () => sink.complete(),
        error(error) {
          const { code, reason } = (error ?? {}) as { code?: number; reason?: string };
          if (!stopped && code === EXPIRED.code && reason === EXPIRED.reason) start();
          else sink.error(error);
        },
      });
    };
    start();
    return () => {
      stopped = true;
      stop();
    };
  }
  return { subscribe, dispose: () => client.dispose() };
}

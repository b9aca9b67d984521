import { createClient, type Client, type ClientOptions } from 'graphql-ws';

/**
 * Subscriptions over WebSocket that outlive access tokens. `connectionParams` is a function, so every connection
 * sends the token that is current then. The server closes a connection whose token is refused or has expired with
 * 4403 Forbidden, which graphql-ws retries: it reconnects with a fresh token and subscribes again to every
 * subscription still open. Events published in that gap are not replayed over WebSocket; SSE can resume.
 */
export function freshTokenClient(
  options: Omit<ClientOptions, 'connectionParams'> & { token: () => Promise<string> },
): Client {
  const { token, ...rest } = options;
  return createClient({
    retryAttempts: 5,
    ...rest,
    connectionParams: async () => ({ authorization: `Bearer ${await token()}` }),
  });
}

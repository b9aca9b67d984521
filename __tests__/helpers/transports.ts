import { createClient } from 'graphql-ws';
import request from 'supertest';
import WebSocket from 'ws';

/** The four ways a client sends one GraphQL operation; the pipeline must treat them alike. */
export const TRANSPORTS = ['post', 'get', 'ws', 'sse'] as const;
export type Transport = (typeof TRANSPORTS)[number];

export interface Operation {
  query?: string;
  variables?: Record<string, unknown>;
  operationName?: string;
  extensions?: Record<string, unknown>;
  documentId?: string;
}

export interface Outcome {
  /** HTTP status (POST, GET, SSE); undefined over WebSocket. */
  status?: number;
  headers?: Record<string, string>;
  body: {
    data?: Record<string, unknown> | null;
    errors?: { message: string; extensions?: Record<string, unknown> }[];
    extensions?: Record<string, unknown>;
  };
}

const auth = (token?: string): Record<string, string> => (token ? { authorization: `Bearer ${token}` } : {});

/** GET carries variables and extensions as URL-encoded JSON, as the GraphQL-over-HTTP spec says. */
function searchParams(op: Operation): Record<string, string> {
  return {
    ...(op.query !== undefined ? { query: op.query } : {}),
    ...(op.operationName ? { operationName: op.operationName } : {}),
    ...(op.variables ? { variables: JSON.stringify(op.variables) } : {}),
    ...(op.extensions ? { extensions: JSON.stringify(op.extensions) } : {}),
    ...(op.documentId ? { documentId: op.documentId } : {}),
  };
}

/** The first `next` event of a graphql-sse stream in distinct-connections mode. */
function firstSseResult(text: string): Outcome['body'] {
  const event = text.split('\n\n').find((e) => e.startsWith('event: next') || e.includes('\nevent: next'));
  const data = event && /^data: (.*)$/m.exec(event)?.[1];
  if (!data) throw new Error(`no next event in ${JSON.stringify(text.slice(0, 300))}`);
  return JSON.parse(data) as Outcome['body'];
}

export async function send(url: string, transport: Transport, op: Operation, token?: string): Promise<Outcome> {
  if (transport === 'post' || transport === 'get') {
    const res =
      transport === 'post'
        ? await request(url).post('/graphql').set(auth(token)).set('accept', 'application/json').send(op)
        : await request(url)
            .get('/graphql')
            .set(auth(token))
            // What production asks of a GET that sends query text (Apollo's CSRF prevention; see cookieCsrf.ts).
            .set({ accept: 'application/json', 'apollo-require-preflight': 'true' })
            .query(searchParams(op));
    return { status: res.status, headers: res.headers as Record<string, string>, body: res.body as Outcome['body'] };
  }
  if (transport === 'sse') {
    // Queries go by GET (as EventSource would); mutations must be POSTed.
    const mutation = /^\s*mutation\b/.test(op.query ?? '');
    const base = mutation
      ? request(url)
          .post('/graphql/stream')
          .send({ query: '', ...op })
      : request(url)
          .get('/graphql/stream')
          .query({ query: '', ...searchParams(op) });
    const res = await base.set(auth(token)).set('accept', 'text/event-stream').buffer(true);
    const type = res.headers['content-type'] ?? '';
    const body = type.startsWith('text/event-stream')
      ? firstSseResult(res.text)
      : type.includes('json')
        ? (JSON.parse(res.text) as Outcome['body'])
        : {};
    return { status: res.status, headers: res.headers as Record<string, string>, body };
  }
  const client = createClient({
    url: url.replace(/^http/, 'ws') + '/graphql',
    webSocketImpl: WebSocket,
    retryAttempts: 0,
    connectionParams: auth(token),
  });
  try {
    const body = await new Promise<Outcome['body']>((resolve) => {
      let first: Outcome['body'] | undefined;
      client.subscribe({ query: '', ...op } as { query: string }, {
        next: (value) => (first ??= value as Outcome['body']),
        error: (error) =>
          resolve({ errors: Array.isArray(error) ? error : [{ message: String((error as Error).message ?? error) }] }),
        complete: () => resolve(first ?? {}),
      });
    });
    return { body };
  } finally {
    await client.dispose();
  }
}

/** The `extensions.code` of the first error, or undefined. */
export const codeOf = (outcome: Outcome) => outcome.body.errors?.[0]?.extensions?.code;

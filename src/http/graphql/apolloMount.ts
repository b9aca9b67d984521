import { HeaderMap, type ApolloServer, type BaseContext, type HTTPGraphQLRequest } from '@apollo/server';
import type { Request, RequestHandler, Response } from 'express';
import { tracing } from '../../tracing.js';
import { OPERATION_SPAN } from '../pipeline/index.js';

/** The query string of a request target, as url.parse() gives it for Apollo (which decodes it itself). */
function searchOf(url: string): string {
  const query = url.indexOf('?');
  if (query < 0) return '';
  const fragment = url.indexOf('#', query);
  return fragment < 0 ? url.slice(query) : url.slice(query, fragment);
}

/** What Apollo gets of a request, or nothing when the request is answered already. */
type Handed = { body: unknown; search: string } | undefined;

/**
 * Apollo Server on Express 5: what `expressMiddleware` of @as-integrations/express5 does, for less per request. The
 * query string is cut from the URL instead of parsed by the legacy url.parse() (whose escaping Apollo's
 * URLSearchParams undoes anyway), and the request headers are copied into Apollo's HeaderMap without a list of
 * entries. The answer is written once: its headers, status and length in one head and the string in one end for a
 * complete body, chunk by chunk for an incremental one.
 */
export function apolloMiddleware<TContext extends BaseContext>(
  server: ApolloServer<TContext>,
  context: (args: { req: Request; res: Response }) => Promise<TContext>,
  /**
   * What Apollo gets of the request: its body and query string (persistedDocuments.ts names documents by hash, and
   * prepares them inside the operation span); nothing when it has answered the request itself.
   */
  handOff: (req: Request, res: Response, search: string) => Handed | Promise<Handed> = (req, _res, search) => ({
    body: req.body,
    search,
  }),
): RequestHandler {
  server.assertStarted('apolloMiddleware()');
  return async (req, res) => {
    if (!('body' in req)) {
      res.status(500);
      res.send(
        '`req.body` is not set; this probably means you forgot to set up the ' +
          '`json` middleware before the Apollo Server middleware.',
      );
      return;
    }
    const execute = async () => {
      const handed = await handOff(req, res, searchOf(req.url));
      if (!handed) return undefined;
      const headers = new HeaderMap();
      const incoming = req.headers;
      for (const key in incoming) {
        const value = incoming[key];
        if (value !== undefined) headers.set(key, Array.isArray(value) ? value.join(', ') : value);
      }
      const { body, search } = handed;
      const httpGraphQLRequest: HTTPGraphQLRequest = { method: req.method.toUpperCase(), headers, search, body };
      return server.executeHTTPGraphQLRequest({ httpGraphQLRequest, context: () => context({ req, res }) });
    };
    // The GraphQL operation span: the document's preparation and everything Apollo does run inside it (the plugin
    // names it once the operation is known; parse, validate and execute hang under it).
    const response = await (tracing.enabled ? tracing.inSpan(OPERATION_SPAN, {}, execute) : execute());
    if (!response) return;
    for (const [key, value] of response.headers) res.setHeader(key, value);
    if (response.body.kind === 'complete') {
      // Written once: the head with its length, then the string (res.send would copy a long one into a Buffer).
      const body = response.body.string;
      res.writeHead(response.status || 200, { 'content-length': Buffer.byteLength(body) });
      res.end(body);
      return;
    }
    res.statusCode = response.status || 200;
    for await (const chunk of response.body.asyncIterator) {
      res.write(chunk);
      const flushable = res as Response & { flush?: () => void };
      if (typeof flushable.flush === 'function') flushable.flush();
    }
    res.end();
  };
}

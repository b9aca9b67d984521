import type { NextFunction, Request, Response } from 'express';
import type { GraphQLError } from 'graphql';
import { namedHash, sha256, type Pipeline } from '../pipeline/index.js';
import { codeOf, mediaTypeFor, requestErrorStatus, sendGraphqlError, writeAnswer } from '../problems/index.js';

/**
 * Before Apollo: a `documentId` becomes the persisted-query extension Apollo knows; a hash that does not
 * match its text, or an untrusted text in trusted-documents mode, is refused with its own code; a text
 * over the static limits is refused before Apollo's full validation. Apollo then looks hashes up in the
 * pipeline's document store and validates with the pipeline's rules, limits included.
 */
export function persistedDocuments(pipeline: Pipeline) {
  // Hashes of texts that passed the static limits lately, so a popular query is not parsed twice per request.
  const screened = new Set<string>();
  const remember = (key: string) => {
    if (screened.size >= 1000) screened.delete(screened.values().next().value!);
    screened.add(key);
  };
  /** A request error as Apollo would send it, with the status requestErrorStatus gives. */
  const sendRequestErrors = (req: Request, res: Response, errors: GraphQLError[]) => {
    const type = mediaTypeFor(req.headers.accept) || 'application/json';
    res.vary('Accept');
    writeAnswer(res, requestErrorStatus(type, 400), type, JSON.stringify({ errors: pipeline.formatErrors(errors) }));
  };
  return (req: Request, res: Response, next: NextFunction) => {
    const params = res.locals.graphqlParams;
    const text = params.query !== undefined && params.query !== '' ? params.query : undefined;
    const key = text && sha256(text);
    const problem = pipeline.checkSource(params, key);
    if (problem) return sendGraphqlError(req, res, problem.message, codeOf(problem));
    if (text && key && !screened.has(key)) {
      const { errors } = pipeline.screen(text);
      // Parse errors are left to Apollo, which reports them the same way and as cheaply.
      if (errors?.[0]?.extensions.code === 'GRAPHQL_VALIDATION_FAILED') return sendRequestErrors(req, res, errors);
      if (!errors) remember(key);
    }
    const hash = namedHash(params);
    // Apollo takes an empty query with a hash for a mismatch; without text, the hash alone names the document.
    if (hash !== undefined && !text) {
      const persistedQuery = { version: 1, sha256Hash: hash };
      if (req.method === 'GET') {
        const url = new URL(req.url, 'http://x');
        url.searchParams.delete('documentId');
        url.searchParams.delete('query');
        url.searchParams.set('extensions', JSON.stringify({ ...params.extensions, persistedQuery }));
        req.url = url.pathname + url.search;
      } else {
        const { documentId: _id, query: _query, ...rest } = params;
        req.body = { ...rest, extensions: { ...rest.extensions, persistedQuery } };
      }
    }
    next();
  };
}

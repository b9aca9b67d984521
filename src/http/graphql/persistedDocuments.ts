import type { KeyValueCache } from '@apollo/utils.keyvaluecache';
import type { NextFunction, Request, Response } from 'express';
import type { GraphQLError } from 'graphql';
import { namedHash, sha256, type GraphqlParams, type Pipeline } from '../pipeline/index.js';
import { codeOf, mediaTypeFor, requestErrorStatus, sendGraphqlError, writeAnswer } from '../problems/index.js';

declare module 'express-serve-static-core' {
  interface Locals {
    /** The sha256 of the request's document (of its text, or the hash it names), worked out once, here. */
    graphqlHash?: string;
  }
}

/** Apollo prefixes its persisted-query keys so (pipeline.ts reads the same entries). */
const APQ_PREFIX = 'apq:';
/** Texts handed to Apollo and not yet read back: a request Apollo refused early leaves one; they are few. */
const MAX_IN_FLIGHT = 1000;

/**
 * Persisted documents, and the document's hash worked out once for the whole request. Before Apollo: a hash that
 * does not match its text, or an untrusted text in trusted-documents mode, is refused with its own code; a text over
 * the static limits is refused before Apollo's full validation. The hash goes on in `res.locals.graphqlHash` (the
 * result cache keys by it).
 *
 * Apollo is then reached by hash alone (`handOff`): a text's request becomes a persisted-query lookup of its hash,
 * which `cache` answers with that very text, so Apollo neither hashes the text again nor, for a document it has
 * validated before, parses it. A `documentId` becomes the persisted-query extension Apollo knows. A registration
 * (a text with its hash) is left as the client sent it: Apollo checks and stores it, as APQ asks.
 */
export function persistedDocuments(pipeline: Pipeline) {
  // Hashes of texts that passed the static limits lately, so a popular query is not parsed twice per request.
  const screened = new Set<string>();
  const remember = (key: string) => {
    if (screened.size >= 1000) screened.delete(screened.values().next().value!);
    screened.add(key);
  };
  /** Texts handed to Apollo by hash, each read back once per request that handed it (the count). */
  const inFlight = new Map<string, { text: string; count: number }>();

  /** A request error as Apollo would send it, with the status requestErrorStatus gives. */
  const sendRequestErrors = (req: Request, res: Response, errors: GraphQLError[]) => {
    const type = mediaTypeFor(req.headers.accept) || 'application/json';
    res.vary('Accept');
    writeAnswer(res, requestErrorStatus(type, 400), type, JSON.stringify({ errors: pipeline.formatErrors(errors) }));
  };

  const middleware = (req: Request, res: Response, next: NextFunction) => {
    const params = res.locals.graphqlParams;
    const text = params.query !== undefined && params.query !== '' ? params.query : undefined;
    const key = text ? sha256(text) : namedHash(params);
    res.locals.graphqlHash = key;
    const problem = pipeline.checkSource(params, text && key);
    if (problem) return sendGraphqlError(req, res, problem.message, codeOf(problem));
    if (text && key && !screened.has(key)) {
      const { errors } = pipeline.screen(text);
      // Parse errors are left to Apollo, which reports them the same way and as cheaply.
      if (errors?.[0]?.extensions.code === 'GRAPHQL_VALIDATION_FAILED') return sendRequestErrors(req, res, errors);
      if (!errors) remember(key);
    }
    next();
  };

  /** Apollo's persisted-query store: a text this request handed over, else the pipeline's documents. */
  const cache: KeyValueCache<string> = {
    get: async (key) => {
      const handed = inFlight.get(key.slice(APQ_PREFIX.length));
      if (!handed) return pipeline.documents.get(key);
      if (--handed.count === 0) inFlight.delete(key.slice(APQ_PREFIX.length));
      return handed.text;
    },
    set: (key, value, options) => pipeline.documents.set(key, value, options),
    delete: (key) => pipeline.documents.delete(key),
  };

  /** What Apollo gets of a request: its body (POST) or query string (GET), naming the document by hash alone. */
  function handOff(req: Request, res: Response, search: string): { body: unknown; search: string } {
    const params = res.locals.graphqlParams;
    const hash = res.locals.graphqlHash;
    const text = params.query !== undefined && params.query !== '' ? params.query : undefined;
    // A registration, or no document at all: Apollo sees what the client sent.
    if (hash === undefined || (text !== undefined && namedHash(params) !== undefined))
      return { body: req.body, search };
    if (text !== undefined) {
      const handed = inFlight.get(hash);
      if (handed) handed.count++;
      else {
        if (inFlight.size >= MAX_IN_FLIGHT) inFlight.delete(inFlight.keys().next().value!);
        inFlight.set(hash, { text, count: 1 });
      }
    }
    const extensions = { ...params.extensions, persistedQuery: { version: 1, sha256Hash: hash } };
    if (req.method === 'GET') return { body: req.body, search: searchOf(params, extensions) };
    const { documentId: _id, query: _query, sentJsonLength: _length, ...rest } = params;
    return { body: { ...rest, extensions }, search };
  }

  return { middleware, cache, handOff };
}

/** A GET's parameters for Apollo, which parses them again from the query string. */
function searchOf(params: GraphqlParams, extensions: Record<string, unknown>): string {
  const search = new URLSearchParams();
  if (typeof params.operationName === 'string') search.set('operationName', params.operationName);
  if (params.variables != null) search.set('variables', JSON.stringify(params.variables));
  search.set('extensions', JSON.stringify(extensions));
  return `?${search.toString()}`;
}

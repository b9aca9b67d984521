import type { KeyValueCache } from '@apollo/utils.keyvaluecache';
import type { NextFunction, Request, Response } from 'express';
import type { DocumentNode, GraphQLError } from 'graphql';
import {
  isRefusal,
  namedHash,
  sha256,
  type GraphqlParams,
  type Pipeline,
  type PreparedDocument,
} from '../pipeline/index.js';
import { codeOf, mediaTypeFor, requestErrorStatus, sendGraphqlError, writeAnswer } from '../problems/index.js';

declare module 'express-serve-static-core' {
  interface Locals {
    /** The sha256 of the request's document (of its text, or the hash it names), worked out once, here. */
    graphqlHash?: string;
    /** The prepared record of the request's document, once handOff has found or built it. */
    graphqlRecord?: PreparedDocument;
  }
}

declare module '../../context.js' {
  interface Context {
    /**
     * HTTP only: the prepared record of the document Apollo runs for this request (apolloMount.ts's context sets it).
     * Apollo runs the operation with a shallow copy of the context, which keeps it.
     */
    prepared?: PreparedDocument;
  }
}

/** Apollo prefixes its persisted-query keys so (pipeline.ts reads the same entries). */
const APQ_PREFIX = 'apq:';
/** Documents handed to Apollo and not yet read back: a request Apollo refused early leaves one; they are few. */
const MAX_IN_FLIGHT = 1000;

/** What a request hands Apollo by hash: the text, and its record unless it did not validate (Apollo then reports). */
interface Handed {
  readonly source: string;
  readonly record: PreparedDocument | undefined;
  count: number;
}

/**
 * Persisted documents, and the document's hash worked out once for the whole request. `middleware`, before the result
 * cache: a hash that does not match its text, or an untrusted text in trusted-documents mode, is refused with its own
 * code; the hash goes on in `res.locals.graphqlHash` (the result cache keys by it).
 *
 * `handOff`, inside Apollo's operation span: the document's prepared record (pipeline/prepared.ts) is found, or built
 * now (parsed, held to the static limits and validated, once); a document over the limits is refused here. Apollo is
 * then reached by hash alone: a text's request becomes a persisted-query lookup of its hash, which `cache` answers
 * with that very text, and `documentStore` gives Apollo the record's parsed document, so Apollo neither hashes, parses
 * nor validates. A document that does not parse or validate has no record: Apollo parses it and reports its errors
 * itself. A `documentId` becomes the persisted-query extension Apollo knows. A registration (a text with its hash) is
 * left as the client sent it: Apollo checks and stores it, as APQ asks.
 */
export function persistedDocuments(pipeline: Pipeline) {
  const { records } = pipeline;
  const handed = new Map<string, Handed>();
  const hand = (hash: string, source: string, record: PreparedDocument | undefined) => {
    const known = handed.get(hash);
    if (known && known.record === record) return void known.count++;
    if (handed.size >= MAX_IN_FLIGHT) handed.delete(handed.keys().next().value!);
    handed.set(hash, { source, record, count: (known?.count ?? 0) + 1 });
  };

  /** A request error as Apollo would send it, with the status requestErrorStatus gives. */
  const sendRequestErrors = (req: Request, res: Response, errors: readonly GraphQLError[]) => {
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
    next();
  };

  /** Apollo's persisted-query store: the text the request handed over (handOff has looked the hash up). */
  const cache: KeyValueCache<string> = {
    get: async (key) => handed.get(key.slice(APQ_PREFIX.length))?.source,
    set: (key, value, options) => pipeline.documents.set(key, value, options),
    delete: (key) => pipeline.documents.delete(key),
  };

  /**
   * Apollo's document store (its keys are the schema's hash, `:`, the document's): the record's parsed document,
   * read once per request that handed it over. Apollo stores nothing here: what it validates itself has no record.
   */
  const documentStore: KeyValueCache<DocumentNode> = {
    get: async (key) => {
      const hash = key.slice(key.indexOf(':') + 1);
      const known = handed.get(hash);
      if (known && --known.count === 0) handed.delete(hash);
      return (known ? known.record : records.get(hash))?.document;
    },
    set: async () => {},
    delete: async () => false,
  };

  /**
   * What Apollo gets of a request: its body (POST) or query string (GET), naming the document by hash alone; nothing
   * when the document was refused here (the answer is sent).
   */
  async function handOff(
    req: Request,
    res: Response,
    search: string,
  ): Promise<{ body: unknown; search: string } | undefined> {
    const params = res.locals.graphqlParams;
    const hash = res.locals.graphqlHash;
    // No document at all: Apollo answers.
    if (hash === undefined) return { body: req.body, search };
    const text = params.query !== undefined && params.query !== '' ? params.query : undefined;
    // A hash alone runs only while the persisted documents hold it (a record outlives an expired registration).
    const source = text ?? (await pipeline.documents.get(APQ_PREFIX + hash));
    let record = source === undefined ? undefined : records.get(hash);
    if (source !== undefined && !record) {
      const prepared = pipeline.prepareDocument(source, hash);
      if (isRefusal(prepared) && prepared.stage === 'limits') {
        sendRequestErrors(req, res, prepared.errors);
        return undefined;
      }
      if (!isRefusal(prepared)) record = prepared;
    }
    res.locals.graphqlRecord = record;
    // A registration: Apollo sees what the client sent.
    if (text !== undefined && namedHash(params) !== undefined) return { body: req.body, search };
    if (source !== undefined) hand(hash, source, record);
    const extensions = { ...params.extensions, persistedQuery: { version: 1, sha256Hash: hash } };
    if (req.method === 'GET') return { body: req.body, search: searchOf(params, extensions) };
    const { documentId: _id, query: _query, sentJsonLength: _length, ...rest } = params;
    return { body: { ...rest, extensions }, search };
  }

  return { middleware, cache, documentStore, handOff };
}

/** A GET's parameters for Apollo, which parses them again from the query string. */
function searchOf(params: GraphqlParams, extensions: Record<string, unknown>): string {
  const search = new URLSearchParams();
  if (typeof params.operationName === 'string') search.set('operationName', params.operationName);
  if (params.variables != null) search.set('variables', JSON.stringify(params.variables));
  search.set('extensions', JSON.stringify(extensions));
  return `?${search.toString()}`;
}

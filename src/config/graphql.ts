import { existsSync } from 'node:fs';
import { z } from 'zod';
import { optionalString, type Concern } from './values.js';

const env = {
  MAX_QUERY_DEPTH: z.coerce.number().int().min(1).max(100).default(12),
  MAX_ALIASES: z.coerce.number().int().min(0).max(1000).default(15),
  MAX_DIRECTIVES: z.coerce.number().int().min(0).max(1000).default(50),
  MAX_TOKENS: z.coerce.number().int().min(100).max(100_000).default(1000),
  MAX_QUERY_COST: z.coerce.number().int().min(1).default(10000),
  MAX_SUBSCRIPTION_COST: z.coerce.number().int().min(1).default(200),
  MAX_MUTATIONS: z.coerce.number().int().min(1).max(1000).default(10),
  PERSISTED_DOCUMENTS: optionalString.pipe(
    z
      .string()
      .refine((p) => existsSync(p), 'PERSISTED_DOCUMENTS must name an existing manifest.json')
      .optional(),
  ),
  APQ_MAX_BYTES: z.coerce
    .number()
    .int()
    .min(0)
    .default(8 * 1024),
  APQ_MAX_ENTRIES: z.coerce.number().int().min(0).default(2000),
  RESULT_CACHE: z.enum(['on', 'off']).default('off'),
  RESULT_CACHE_MAX_BYTES: z.coerce
    .number()
    .int()
    .min(65_536)
    .max(2 ** 34)
    .default(32 * 2 ** 20),
  RESULT_CACHE_TTL_S: z.coerce.number().int().min(1).max(86_400).default(60),
};

/** GraphQL: the limits every document meets before anything runs, persisted documents, the result cache. */
export const graphql = {
  model: z.object(env).transform((e) => ({
    /** Static limits and the cost ceiling every GraphQL document meets before anything runs, on every transport. */
    graphql: {
      maxDepth: e.MAX_QUERY_DEPTH,
      maxAliases: e.MAX_ALIASES,
      maxDirectives: e.MAX_DIRECTIVES,
      maxTokens: e.MAX_TOKENS,
      maxCost: e.MAX_QUERY_COST,
      /** A subscription runs again for every event it is sent, so its document gets a ceiling of its own. */
      maxSubscriptionCost: e.MAX_SUBSCRIPTION_COST,
      maxMutations: e.MAX_MUTATIONS,
      /** A graphql-codegen persisted-documents manifest: when set, production runs only these documents. */
      ...(e.PERSISTED_DOCUMENTS ? { persistedDocuments: e.PERSISTED_DOCUMENTS } : {}),
      /** Automatic persisted queries: larger documents are not registered, and at most this many are kept. */
      apq: { maxBytes: e.APQ_MAX_BYTES, maxEntries: e.APQ_MAX_ENTRIES },
    },
    /** The GraphQL result cache (RESULT_CACHE=on): query responses in memory, flushed by order events. */
    resultCache:
      e.RESULT_CACHE === 'on'
        ? {
            enabled: true as const,
            maxBytes: e.RESULT_CACHE_MAX_BYTES,
            ttlSeconds: e.RESULT_CACHE_TTL_S,
            maxKeyBytes: 4096,
          }
        : { enabled: false as const },
  })),
} satisfies Concern<z.ZodType>;

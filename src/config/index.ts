import type { z } from 'zod';
import { auth } from './auth.js';
import { browser } from './browser.js';
import { graphql } from './graphql.js';
import { http } from './http.js';
import { observability } from './observability.js';
import { scim } from './scim.js';
import { store } from './store.js';
import { streams } from './streams.js';
import { tracing } from './tracing.js';
import type { LoadConfigOptions } from './values.js';
import { webhooks } from './webhooks.js';

export type { LogLevel } from './observability.js';
export type { TraceSampler } from './tracing.js';
export type { LoadConfigOptions } from './values.js';

/**
 * The concerns, each a model of its own settings whose transform gives its slice of the configuration. Their order is
 * the order problems are listed in; every concern's rules between settings come after every malformed setting.
 */
const CONCERNS = [http, auth, store, browser, observability, graphql, streams, scim, webhooks, tracing] as const;

type DeepReadonly<T> = T extends (infer U)[]
  ? readonly DeepReadonly<U>[]
  : T extends object
    ? { readonly [K in keyof T]: DeepReadonly<T[K]> }
    : T;
type Slice<C> = C extends { model: z.ZodType } ? z.output<C['model']> : never;
type Slices<T extends readonly unknown[]> = T extends readonly [infer Head, ...infer Rest]
  ? Slice<Head> & Slices<Rest>
  : unknown;

export type Config = DeepReadonly<Slices<typeof CONCERNS>>;
export type DatabaseConfig = Config['database'];
export type TracingConfig = Config['tracing'];
export type StreamLimits = Config['streams'];
export type TrustProxy = Config['trustProxy'];

export class ConfigError extends Error {
  constructor(readonly problems: readonly string[]) {
    super(`Invalid configuration:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
    this.name = 'ConfigError';
  }
}

/** Validates the whole environment at once so that every problem is reported together. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env, opts: LoadConfigOptions = {}): Config {
  const parsed = CONCERNS.map((concern) => concern.model.safeParse(env));
  // Rules between settings read the raw strings, so they are reported even when some single setting is malformed
  // (zod would skip an object-level refinement then).
  const problems = [
    ...parsed.flatMap((result) =>
      result.success ? [] : result.error.issues.map((i) => `${i.path.join('.') || 'environment'}: ${i.message}`),
    ),
    ...CONCERNS.flatMap((concern) => ('rules' in concern ? concern.rules(env, opts) : [])),
  ];
  if (problems.length) throw new ConfigError(problems);
  const slices = parsed.map((result) => result.data);
  return deepFreeze(Object.assign({}, ...slices) as Config);
}

function deepFreeze<T>(value: T): T {
  if (value && typeof value === 'object') {
    for (const v of Object.values(value)) deepFreeze(v);
    Object.freeze(value);
  }
  return value;
}

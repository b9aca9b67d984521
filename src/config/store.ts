import { z } from 'zod';
import { nodeEnvOf } from './http.js';
import { isSet, optionalString, type Concern } from './values.js';

const env = {
  NODE_ENV: nodeEnvOf,
  DATABASE_URL: optionalString.pipe(
    z
      .string()
      .regex(/^postgres(ql)?:\/\//, 'DATABASE_URL must start with postgres:// or postgresql://')
      .optional(),
  ),
  DATABASE_SCHEMA: optionalString.pipe(
    z
      .string()
      .regex(/^[a-z_][a-z0-9_]{0,62}$/, 'DATABASE_SCHEMA must be a lower-case SQL identifier')
      .optional(),
  ),
  DATA_DIR: z.string().trim().min(1).default('./.data'),
  REDIS_URL: optionalString.pipe(
    z
      .string()
      .regex(/^rediss?:\/\//, 'REDIS_URL must start with redis:// or rediss://')
      .optional(),
  ),
  EVENT_POLL_MS: z.coerce.number().int().min(10).max(3_600_000).optional(),
  SWEEP_INTERVAL_S: z.coerce.number().int().min(1).max(86_400).default(300),
};

/** The database, Redis, and the replica's background reads and sweeps of them. */
export const store = {
  model: z.object(env).transform((e) => ({
    database: e.DATABASE_URL
      ? {
          kind: 'postgres' as const,
          url: e.DATABASE_URL,
          ...(e.DATABASE_SCHEMA ? { schema: e.DATABASE_SCHEMA } : {}),
        }
      : { kind: 'pglite' as const, dataDir: e.DATA_DIR },
    ...(e.REDIS_URL ? { redisUrl: e.REDIS_URL } : {}),
    /** How often each replica reads the event outbox for what Redis did not bring (or, without Redis, everything). */
    // Tests run replicas without Redis, where the poll is the only path between them: they should not wait 5 s.
    eventPollMs: e.EVENT_POLL_MS ?? (e.NODE_ENV === 'test' ? 200 : 5000),
    /** How often one replica deletes expired rows (idempotency keys, sessions, sign-ins, old events). */
    sweepIntervalSeconds: e.SWEEP_INTERVAL_S,
  })),
  rules: (raw, opts) => [
    ...(raw.NODE_ENV?.trim() === 'production' && !isSet(raw, 'DATABASE_URL') && !opts.databaseHandedIn
      ? ['DATABASE_URL: is required in production (the embedded database is for development only)']
      : []),
    ...(isSet(raw, 'DATABASE_SCHEMA') && !isSet(raw, 'DATABASE_URL')
      ? ['DATABASE_SCHEMA: only applies together with DATABASE_URL']
      : []),
  ],
} satisfies Concern<z.ZodType>;

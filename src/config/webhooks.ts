import { z } from 'zod';
import { trueOrFalse, type Concern } from './values.js';

const env = {
  WEBHOOK_TIMEOUT_MS: z.coerce.number().int().min(100).max(120_000).default(10_000),
  WEBHOOK_RETRY_SCHEDULE_S: z
    .string()
    .trim()
    .default('0,5,300,1800,7200,18000,36000,36000')
    .refine(
      (v) => /^\d{1,6}(,\d{1,6}){0,19}$/.test(v.replace(/\s+/g, '')),
      'WEBHOOK_RETRY_SCHEDULE_S must be 1 to 20 comma-separated whole seconds (each at most 999999)',
    )
    .transform((v) => v.replace(/\s+/g, '').split(',').map(Number)),
  WEBHOOK_ALLOW_PRIVATE_URLS: trueOrFalse('WEBHOOK_ALLOW_PRIVATE_URLS'),
  WEBHOOK_POLL_MS: z.coerce.number().int().min(10).max(60_000).default(1000),
  WEBHOOK_CONCURRENCY: z.coerce.number().int().min(0).max(1000).default(32),
  WEBHOOK_ENDPOINT_CONCURRENCY: z.coerce.number().int().min(1).max(100).default(4),
  WEBHOOK_OWNER_CONCURRENCY: z.coerce.number().int().min(1).max(1000).default(8),
  WEBHOOK_DISABLE_AFTER_S: z.coerce.number().int().min(1).max(31_536_000).default(432_000),
};

/** Webhook delivery (docs/webhooks.md). */
export const webhooks = {
  model: z.object(env).transform((e) => ({
    webhooks: {
      /** One attempt, resolving the host included, is cut after this long. */
      timeoutMs: e.WEBHOOK_TIMEOUT_MS,
      /** The delay before each attempt, in seconds; a message gets as many attempts as there are entries. */
      retryScheduleSeconds: e.WEBHOOK_RETRY_SCHEDULE_S,
      /** http and loopback/private targets admitted: development, tests, compose's internal network. */
      allowPrivateUrls: e.WEBHOOK_ALLOW_PRIVATE_URLS,
      /** How often each replica looks for due messages (new events also wake it). */
      pollMs: e.WEBHOOK_POLL_MS,
      /** Attempts in flight per replica (0: this replica sends none), to one endpoint and for one owner per replica. */
      concurrency: e.WEBHOOK_CONCURRENCY,
      endpointConcurrency: e.WEBHOOK_ENDPOINT_CONCURRENCY,
      ownerConcurrency: e.WEBHOOK_OWNER_CONCURRENCY,
      /** An endpoint failing continuously for this long is disabled. */
      disableAfterSeconds: e.WEBHOOK_DISABLE_AFTER_S,
    },
  })),
} satisfies Concern<z.ZodType>;

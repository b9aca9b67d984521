import { z } from 'zod';
import type { Concern } from './values.js';

const env = {
  CORS_ORIGINS: z
    .string()
    .default('')
    .transform((v) =>
      v
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean),
    )
    .pipe(
      z.array(
        z.string().refine((o) => {
          try {
            return new URL(o).origin === o;
          } catch {
            return false;
          }
        }, 'CORS_ORIGINS must be a comma-separated list of origins such as https://app.example.com'),
      ),
    ),
  LOGIN_ATTEMPTS_PER_IP: z.coerce.number().int().min(1).max(10_000).default(50),
  SIGNIN_LOCK_S: z.coerce.number().int().min(1).max(86_400).default(900),
};

/** What browsers meet: the other origins that may call the API, and sign-in's throttles. */
export const browser = {
  model: z.object(env).transform((e) => ({
    corsOrigins: e.CORS_ORIGINS,
    /** Sign-ins in progress kept per client IP; the oldest gives way. */
    loginAttemptsPerIp: e.LOGIN_ATTEMPTS_PER_IP,
    /** How long repeated sign-in failures lock a username or address at the embedded IdP. */
    signin: { lockSeconds: e.SIGNIN_LOCK_S },
  })),
} satisfies Concern<z.ZodType>;

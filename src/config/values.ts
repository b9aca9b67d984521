import { z } from 'zod';

/** Blank is unset: compose files and shells pass `NAME=` for a setting they leave out. */
export const optionalString = z
  .string()
  .trim()
  .transform((v) => (v === '' ? undefined : v))
  .optional();

export const httpUrl = (name: string) =>
  z
    .string()
    .trim()
    .refine((v) => {
      try {
        const u = new URL(v);
        return (u.protocol === 'http:' || u.protocol === 'https:') && !u.search && !u.hash;
      } catch {
        return false;
      }
    }, `${name} must be an http(s) URL without query or fragment`)
    .transform((v) => v.replace(/\/+$/, ''));

export const milliseconds = (max: number) => z.coerce.number<string | undefined>().int().min(1).max(max);

export const trueOrFalse = (name: string) =>
  z
    .string()
    .trim()
    .toLowerCase()
    .default('false')
    .refine((v) => v === 'true' || v === 'false', `${name} must be true or false`)
    .transform((v) => v === 'true');

/** A dotted path into a token's claims (`realm_access.roles`). */
export const claimPath = (problem: string, fallback: string) =>
  z
    .string()
    .trim()
    .regex(/^[^.\s]+(\.[^.\s]+)*$/, problem)
    .default(fallback);

/**
 * A setting's value as its own model reads it (its default when unset), or undefined when it is malformed: rules
 * between settings compare only valid values, and a malformed one is reported on its own.
 */
export function valueOf<T extends z.ZodType>(model: T, raw: string | undefined): z.output<T> | undefined {
  const parsed = model.safeParse(raw);
  return parsed.success ? parsed.data : undefined;
}

/**
 * The rule that one setting must not exceed another, read from the raw environment with each model's own default;
 * compared only when both are valid.
 */
export function notAbove(
  env: NodeJS.ProcessEnv,
  [small, smallModel]: readonly [string, z.ZodType<number | undefined>],
  [large, largeModel]: readonly [string, z.ZodType<number | undefined>],
  why: string,
): string[] {
  const a = valueOf(smallModel, env[small]);
  const b = valueOf(largeModel, env[large]);
  return a !== undefined && b !== undefined && a > b ? [`${small}: must not exceed ${large}${why}`] : [];
}

/** What every concern's module gives the loader: its model over the environment and its rules between settings. */
export interface Concern<T extends z.ZodType> {
  readonly model: T;
  readonly rules?: (env: NodeJS.ProcessEnv, opts: LoadConfigOptions) => string[];
}

export interface LoadConfigOptions {
  /**
   * The caller hands an already open database to startServer (a test's second instance over the first's
   * embedded one), so production's demand for DATABASE_URL does not apply. Deliberately not an env var.
   */
  readonly databaseHandedIn?: boolean;
}

export const isSet = (env: NodeJS.ProcessEnv, name: string) => Boolean(env[name]?.trim());

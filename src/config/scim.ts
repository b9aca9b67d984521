import { z } from 'zod';
import { claimPath, optionalString, type Concern } from './values.js';

const env = {
  /** Only whether an issuer is configured (auth reports a malformed one). */
  OIDC_ISSUER: optionalString.catch(undefined),
  SCIM_TOKEN: optionalString.pipe(
    z
      .string()
      .min(32, 'SCIM_TOKEN must be at least 32 characters (a random secret, e.g. openssl rand -base64 32)')
      .max(512, 'SCIM_TOKEN must be at most 512 characters')
      .regex(/^[A-Za-z0-9\-._~+/]+=*$/, 'SCIM_TOKEN must be a token68 (letters, digits and -._~+/ then optional =)')
      .optional(),
  ),
  SCIM_SCOPE: optionalString.pipe(
    z
      .string()
      .regex(/^[\x21\x23-\x5b\x5d-\x7e]+$/, 'SCIM_SCOPE must be one OAuth scope (no spaces or quotes), or off')
      .optional(),
  ),
  SCIM_LINK_CLAIM: claimPath('SCIM_LINK_CLAIM must be a dotted claim path such as sub, oid or email', 'sub'),
  SCIM_STAFF_GROUP: z.string().trim().min(1).max(256).default('staff'),
};

/**
 * SCIM 2.0 provisioning at /scim/v2. Off (404) unless the directory can authenticate: with the shared secret
 * `token`, or with an access token from the issuer that carries `scope`.
 */
export const scim = {
  model: z.object(env).transform((e) => {
    // SCIM_SCOPE defaults to `scim` with the embedded IdP (development: its `directory` client gets that scope by the
    // client-credentials grant) and to off with any other issuer, so production turns SCIM on only when told.
    const scope = e.SCIM_SCOPE === 'off' ? undefined : (e.SCIM_SCOPE ?? (e.OIDC_ISSUER ? undefined : 'scim'));
    return {
      scim: {
        enabled: Boolean(e.SCIM_TOKEN || scope),
        ...(e.SCIM_TOKEN ? { token: e.SCIM_TOKEN } : {}),
        ...(scope ? { scope } : {}),
        /** The token claim whose value a directory user's externalId is (SCIM_LINK_CLAIM). */
        linkClaim: e.SCIM_LINK_CLAIM,
        /** The group whose members are staff, when the directory sends it (SCIM_STAFF_GROUP). */
        staffGroup: e.SCIM_STAFF_GROUP,
      },
    };
  }),
} satisfies Concern<z.ZodType>;

import { z } from 'zod';
import { ACR, parseAcrValues } from '../domain/policy.js';
import { claimPath, httpUrl, isSet, optionalString, type Concern } from './values.js';

const env = {
  OIDC_ISSUER: optionalString.pipe(httpUrl('OIDC_ISSUER').optional()),
  OIDC_CLIENT_ID: optionalString,
  OIDC_CLIENT_SECRET: optionalString,
  OIDC_ALLOW_HTTP: z
    .string()
    .trim()
    .default('false')
    .refine((v) => v === 'true' || v === 'false', 'OIDC_ALLOW_HTTP must be true or false')
    .transform((v) => v === 'true'),
  API_AUDIENCE: z.string().trim().min(1).default('orders-api'),
  ROLES_CLAIM: claimPath('ROLES_CLAIM must be a dotted claim path such as realm_access.roles', 'roles'),
  OIDC_JWKS_MAX_AGE_S: z.coerce.number().int().min(1).max(86_400).default(600),
  STEP_UP_ACR: z
    .string()
    .trim()
    .default(ACR.mfa)
    .transform((v) => (v === '' ? ACR.mfa : v))
    .refine(
      (v) => v === 'off' || parseAcrValues(v) !== null,
      'STEP_UP_ACR must be off or up to 10 space-separated acr values of visible ASCII without quotes or backslashes',
    )
    .transform((v) => (v === 'off' ? null : parseAcrValues(v)!)),
  STEP_UP_MAX_AGE_S: z.coerce.number().int().min(1).max(86_400).default(900),
};

/** Who the callers are: the OpenID provider, the API's audience and roles, step-up for staff writes. */
export const auth = {
  model: z.object(env).transform((e) => ({
    oidc: {
      /** Unset means the embedded development identity provider at `${publicUrl}/idp`. */
      ...(e.OIDC_ISSUER ? { issuer: e.OIDC_ISSUER } : {}),
      ...(e.OIDC_CLIENT_ID ? { clientId: e.OIDC_CLIENT_ID } : {}),
      ...(e.OIDC_CLIENT_SECRET ? { clientSecret: e.OIDC_CLIENT_SECRET } : {}),
      audience: e.API_AUDIENCE,
      rolesClaim: e.ROLES_CLAIM,
      /**
       * An external issuer's JWKS is fetched again once it is this old (and at most this often for an unknown key
       * id): the longest a key removed from the issuer's JWKS still validates tokens this replica has already verified.
       */
      jwksMaxAgeSeconds: e.OIDC_JWKS_MAX_AGE_S,
      /** A plain-HTTP issuer is allowed in production (compose's Keycloak on the private network, tests). */
      allowHttp: e.OIDC_ALLOW_HTTP,
    },
    /**
     * RFC 9470 step-up for the staff role's writes: an `acr` among `acrValues` and an `auth_time` at most
     * `maxAgeSeconds` old (STEP_UP_ACR, STEP_UP_MAX_AGE_S). Null with STEP_UP_ACR=off.
     */
    stepUp: e.STEP_UP_ACR ? { acrValues: e.STEP_UP_ACR, maxAgeSeconds: e.STEP_UP_MAX_AGE_S } : null,
  })),
  rules: (raw) => {
    const problems: string[] = [];
    if (raw.NODE_ENV?.trim() === 'production') {
      if (!isSet(raw, 'OIDC_ISSUER'))
        problems.push(
          'OIDC_ISSUER: is required in production (the embedded identity provider is for development only)',
        );
      // openid-client refuses plain-HTTP issuers unless told; production says so at start, not at the first sign-in.
      if (
        isSet(raw, 'OIDC_CLIENT_ID') &&
        /^http:/i.test(raw.OIDC_ISSUER?.trim() ?? '') &&
        raw.OIDC_ALLOW_HTTP?.trim() !== 'true'
      )
        problems.push(
          'OIDC_ISSUER: browser sign-in needs an https issuer in production; set OIDC_ALLOW_HTTP=true only for an issuer reached over a private network',
        );
    }
    if (!isSet(raw, 'OIDC_ISSUER') && (isSet(raw, 'OIDC_CLIENT_ID') || isSet(raw, 'OIDC_CLIENT_SECRET')))
      problems.push('OIDC_CLIENT_ID: OIDC_CLIENT_ID/OIDC_CLIENT_SECRET have no meaning without OIDC_ISSUER');
    if (isSet(raw, 'OIDC_CLIENT_SECRET') && !isSet(raw, 'OIDC_CLIENT_ID'))
      problems.push('OIDC_CLIENT_SECRET: is set but OIDC_CLIENT_ID is not');
    return problems;
  },
} satisfies Concern<z.ZodType>;

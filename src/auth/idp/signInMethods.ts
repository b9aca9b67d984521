import type { InteractionDetails } from 'oidc-provider';
import { ACR } from '../../domain/policy.js';

/**
 * How a sign-in at the embedded IdP went, as the ID token and access token say it: `amr` values of RFC 8176 and the
 * `acr` they add up to. Two factors (`mfa`) are a password with a TOTP code or a passkey, or a passkey whose
 * authenticator verified its user (something held, and something known or inherent).
 */
export type Method = 'pwd' | 'otp' | 'hwk' | 'swk' | 'user' | 'mfa';

export interface SignInOutcome {
  readonly acr: string;
  readonly amr: readonly Method[];
}

/** A passkey's methods: the key (`hwk` bound to one device, `swk` when it syncs) and the user presence test. */
export function passkeyMethods(deviceType: 'singleDevice' | 'multiDevice', userPresent: boolean): Method[] {
  return [deviceType === 'multiDevice' ? 'swk' : 'hwk', ...(userPresent ? (['user'] as const) : [])];
}

/** The outcome of these methods; `verifiedUser` is a passkey that verified its user, two factors by itself. */
export function outcomeOf(methods: readonly string[], verifiedUser = false): SignInOutcome {
  const amr = [...new Set(methods.filter((m): m is Method => m !== 'mfa' && isMethod(m)))];
  const factors = new Set(amr.map((m) => (m === 'pwd' ? 'knows' : m === 'user' ? null : 'has')).filter(Boolean));
  const mfa = verifiedUser || factors.size >= 2;
  return { acr: mfa ? ACR.mfa : ACR.password, amr: mfa ? [...amr, 'mfa'] : amr };
}

function isMethod(value: string): value is Method {
  return ['pwd', 'otp', 'hwk', 'swk', 'user', 'mfa'].includes(value);
}

/** The prompt reasons that only ask for a stronger `acr`: the person signed in already needs no password again. */
const STEP_UP_REASONS: ReadonlySet<string> = new Set(['acr_values', 'essential_acr', 'essential_acrs']);

export function onlyStepUpAsked(details: InteractionDetails): boolean {
  return details.prompt.reasons.length > 0 && details.prompt.reasons.every((r) => STEP_UP_REASONS.has(r));
}

/** This IdP's levels, weakest first: a sign-in at a level also satisfies a request for any level below it. */
const LEVELS: readonly string[] = [ACR.password, ACR.mfa];

/**
 * Whether a sign-in at `acr` satisfies a request for any one of `requested`. Values this IdP does not issue are passed
 * over: a request that names none of its levels is satisfied by any sign-in (asking again could not do better).
 */
export function satisfies(acr: string | undefined, requested: readonly string[]): boolean {
  const wanted = requested.map((v) => LEVELS.indexOf(v)).filter((level) => level >= 0);
  return wanted.length === 0 || LEVELS.indexOf(acr ?? '') >= Math.min(...wanted);
}

/**
 * Whether the authorization request asks for two factors, as oidc-provider reads it: `acr_values` (voluntary; it
 * takes the place of the claims parameter's `acr`), else the claims parameter's `id_token.acr` — and whether that
 * insists (`essential`).
 */
export function mfaRequested(details: InteractionDetails): { wanted: boolean; essential: boolean } {
  const { acr_values: acrValues, claims } = details.params as { acr_values?: unknown; claims?: unknown };
  if (typeof acrValues === 'string' && acrValues) {
    return { wanted: !satisfies(ACR.password, acrValues.split(' ')), essential: false };
  }
  let requested: { essential?: unknown; value?: unknown; values?: unknown } | undefined;
  try {
    requested =
      typeof claims === 'string'
        ? (JSON.parse(claims) as { id_token?: { acr?: typeof requested } }).id_token?.acr
        : undefined;
  } catch {
    requested = undefined;
  }
  const values = [
    ...(typeof requested?.value === 'string' ? [requested.value] : []),
    ...(Array.isArray(requested?.values) ? requested.values.filter((v): v is string => typeof v === 'string') : []),
  ];
  const wanted = !satisfies(ACR.password, values);
  return { wanted, essential: wanted && requested?.essential === true };
}

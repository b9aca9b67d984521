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

/**
 * Whether the authorization request asks for two factors: `acr_values` (voluntary) or the `claims` parameter's
 * `id_token.acr` naming the MFA level, and whether it insists (`essential`).
 */
export function mfaRequested(details: InteractionDetails): { wanted: boolean; essential: boolean } {
  const { acr_values: acrValues, claims } = details.params as { acr_values?: unknown; claims?: unknown };
  const voluntary = typeof acrValues === 'string' && acrValues.split(' ').includes(ACR.mfa);
  let requested: { essential?: unknown; value?: unknown; values?: unknown } | undefined;
  try {
    requested =
      typeof claims === 'string'
        ? (JSON.parse(claims) as { id_token?: { acr?: typeof requested } }).id_token?.acr
        : undefined;
  } catch {
    requested = undefined;
  }
  const named =
    requested?.value === ACR.mfa || (Array.isArray(requested?.values) && requested.values.includes(ACR.mfa));
  return { wanted: voluntary || named, essential: named && requested?.essential === true };
}

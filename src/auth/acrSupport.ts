import type { Logger } from 'pino';

const TIMEOUT_MS = 5000;

/**
 * Says at start whether an external issuer can satisfy step-up (RFC 9470): its discovery document must list one of
 * the acr values staff changes need in `acr_values_supported`. An issuer that lists none would leave staff unable to
 * change orders, so the log says so — with the way out (STEP_UP_ACR=off, or the issuer's own acr mapping). Never
 * fails start-up: the issuer may come up after the API, and a check that cannot be made is logged as such.
 */
export async function reportAcrSupport(issuer: string, acrValues: readonly string[], logger: Logger): Promise<void> {
  let listed: unknown;
  try {
    const res = await fetch(`${issuer}/.well-known/openid-configuration`, { signal: AbortSignal.timeout(TIMEOUT_MS) });
    if (!res.ok) throw new Error(`discovery answered ${res.status}`);
    listed = ((await res.json()) as { acr_values_supported?: unknown }).acr_values_supported;
  } catch (err) {
    logger.warn(
      { event: 'auth.step_up_unchecked', issuer, reason: err instanceof Error ? err.message : String(err) },
      'could not read the issuer metadata to check that it issues the acr values staff changes need',
    );
    return;
  }
  const supported = Array.isArray(listed) ? listed.filter((v): v is string => typeof v === 'string') : [];
  if (acrValues.some((acr) => supported.includes(acr))) return;
  logger.warn(
    { event: 'auth.step_up_unsupported', issuer, required: acrValues, acrValuesSupported: supported },
    `the issuer does not list ${acrValues.join(' or ')} in acr_values_supported: staff changes will be refused ` +
      '(insufficient_user_authentication) until it issues one of them; map its levels to these values, set ' +
      'STEP_UP_ACR to what it issues, or STEP_UP_ACR=off',
  );
}

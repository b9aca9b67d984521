import { DPOP_ALGORITHMS } from '../../auth/dpop.js';

/** RFC 6750 §3: tell the client which scheme to use and why its token was refused. */
export function bearerChallenge(
  error?: 'invalid_token' | 'invalid_request' | 'insufficient_scope' | 'insufficient_user_authentication',
  description?: string,
) {
  const params = ['realm="orders-api"'];
  if (error) params.push(`error="${error}"`);
  if (description) params.push(`error_description="${description.replace(/["\\]/g, '')}"`);
  return `Bearer ${params.join(', ')}`;
}

/**
 * RFC 9470 §3: the token is fine but the sign-in behind it is not strong or recent enough; `acr_values` and `max_age`
 * say what to ask the authorization server for.
 */
export function stepUpChallenge(description: string, stepUp: { acrValues: string; maxAge: number }) {
  return `${bearerChallenge('insufficient_user_authentication', description)}, acr_values="${stepUp.acrValues}", max_age=${stepUp.maxAge}`;
}

/** RFC 9449 §7.1: the DPoP scheme's challenge names the proof algorithms this API accepts. */
export function dpopChallenge(error: 'invalid_token' | 'invalid_dpop_proof', description: string) {
  const why = description.replace(/["\\]/g, '');
  return `DPoP error="${error}", error_description="${why}", algs="${DPOP_ALGORITHMS.join(' ')}"`;
}

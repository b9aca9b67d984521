import helmet from 'helmet';

/**
 * Helmet's headers on every response (nosniff among them), set once for the whole app. The policy only forbids
 * framing: a fuller CSP would have to allow the Sandbox landing page's scripts from Apollo's CDN and the inline
 * scripts of the IdP's auto-submitting forms, and would then protect little.
 */
export function securityHeaders() {
  return helmet({
    contentSecurityPolicy: {
      useDefaults: false,
      directives: {
        defaultSrc: helmet.contentSecurityPolicy.dangerouslyDisableDefaultSrc,
        frameAncestors: ["'none'"],
      },
    },
    // For browsers that predate frame-ancestors.
    frameguard: { action: 'deny' },
    // Helmet's no-referrer would make browsers send `Origin: null` on this site's own form posts (Fetch §3.1), and
    // the sign-out and cookie checks would then refuse them as foreign.
    referrerPolicy: { policy: 'same-origin' },
  });
}

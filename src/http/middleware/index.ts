/**
 * What runs before a transport's own work, on every request that reaches one: the caller (authentication), cookies
 * and cookie CSRF, conditional requests' entity tags, JSON bodies, security headers, CORS, and the rate budget every transport spends from. Imports
 * from http/ only problems/ and observability/.
 */
export { authenticate, graphqlAuthFailure, problemAuthFailure, type AuthFailure } from './authenticate.js';
export { ifMatchSatisfied, ifNoneMatchMatches, parseEtagList } from './conditional.js';
export { refuseCookieCsrf, refuseForeignOrigins, refuseSimpleTextGets } from './cookieCsrf.js';
export { authCookies, isForeignOrigin, readCookie, serializeCookie, trustedOrigins } from './cookies.js';
export { crossOrigin } from './crossOrigin.js';
export { jsonBodyParser, readableCoding } from './jsonBody.js';
export {
  clientKey,
  createMemoryRateBudget,
  createRateBudget,
  rateLimitHeaders,
  type Charge,
  type RateBudget,
} from './rateBudget.js';
export { securityHeaders } from './securityHeaders.js';
export { clientIp, isTrustedPeer, peerAddress, proxyTrust, type ProxyTrust } from './clientAddress.js';

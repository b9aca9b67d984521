/** What a browser is served: sign-in and sign-out at /auth (OIDC code + PKCE, a server-side session), and `/`. */
export { favicon } from './favicon.js';
export { homeRoute, type HomeDeps } from './home.js';
export { createAuthRouter, onPublicHost, safeReturnTo } from './signIn.js';

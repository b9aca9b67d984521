// Server-rendered pages of the embedded IdP: plain, accessible HTML that works without JavaScript.

import { createHash } from 'node:crypto';
import { escapeHtml } from '../../html.js';

const STYLE = `
  body { font-family: system-ui, sans-serif; line-height: 1.5; margin: 0; background: #f4f4f5; color: #18181b; }
  main { max-width: 26rem; margin: 3rem auto; padding: 2rem; background: #fff; border-radius: 0.5rem; }
  h1 { font-size: 1.5rem; margin-top: 0; }
  label { display: block; font-weight: 600; margin-top: 1rem; }
  input { display: block; width: 100%; box-sizing: border-box; padding: 0.5rem; font: inherit; border: 1px solid #71717a; border-radius: 0.25rem; }
  button { margin-top: 1.5rem; padding: 0.5rem 1.25rem; font: inherit; border-radius: 0.25rem; border: 1px solid #1d4ed8; background: #1d4ed8; color: #fff; cursor: pointer; }
  button.secondary { background: #fff; color: #1d4ed8; }
  :focus-visible { outline: 3px solid #f59e0b; outline-offset: 2px; }
  .error { color: #b91c1c; font-weight: 600; }
  .actions { display: flex; gap: 0.75rem; flex-wrap: wrap; }
  .hint { color: #52525b; font-size: 0.875rem; margin-top: 1.5rem; }
`;

/**
 * The Content-Security-Policy of every page `layout` renders: no scripts, no plugins, no foreign styles or images;
 * only the one inline stylesheet below, by its hash. Forms may post anywhere (`form-action` is left out): the home
 * page's sign-in goes on to the issuer, which may be on another origin.
 */
export const PAGE_POLICY = [
  "default-src 'none'",
  `style-src 'sha256-${createHash('sha256').update(STYLE).digest('base64')}'`,
  // Nothing on these pages fetches; 'self' keeps this site's own API reachable from the page's origin.
  "connect-src 'self'",
  "base-uri 'none'",
  "frame-ancestors 'none'",
].join('; ');

/**
 * `body` must already be escaped HTML. The IdP's pages send no Referer (their URLs carry interaction ids); the app's
 * own pages (`site` given) keep the site-wide same-origin policy, under which their form posts carry a real Origin.
 */
export function layout(title: string, body: string, site?: string): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
${site ? '' : '<meta name="referrer" content="no-referrer">\n'}<title>${escapeHtml(title)} · ${escapeHtml(site ?? 'Orders sign-in')}</title>
<style>${STYLE}</style>
</head>
<body>
<main>
${body}
</main>
</body>
</html>`;
}

/** `passkeyChoice`: a second button that leads to signing in with a passkey instead (its own page, which needs a script). */
export function loginPage(opts: {
  action: string;
  clientName: string;
  username?: string;
  error?: string;
  passkeyChoice?: boolean;
}): string {
  const invalid = opts.error ? ' aria-invalid="true" aria-describedby="login-error"' : '';
  return layout(
    'Sign in',
    `<h1>Sign in</h1>
<p>to continue to <strong>${escapeHtml(opts.clientName)}</strong></p>
${opts.error ? `<p id="login-error" class="error" role="alert">${escapeHtml(opts.error)}</p>` : ''}
<form method="post" action="${escapeHtml(opts.action)}">
  <label for="username">Username</label>
  <input id="username" name="username" type="text" autocomplete="username" autocapitalize="none" spellcheck="false" required value="${escapeHtml(opts.username)}"${invalid}${opts.username ? '' : ' autofocus'}>
  <label for="password">Password</label>
  <input id="password" name="password" type="password" autocomplete="current-password" required${invalid}${opts.username ? ' autofocus' : ''}>
  <button type="submit">Sign in</button>
${opts.passkeyChoice ? '  <button type="submit" name="method" value="passkey" formnovalidate class="secondary">Use a passkey</button>\n' : ''}</form>
<p class="hint">Development accounts: alice, bob and carol; the password is the username.</p>`,
  );
}

const SCOPE_DESCRIPTIONS: Record<string, string> = {
  openid: 'Confirm who you are',
  profile: 'See your name and username',
  email: 'See your email address',
  offline_access: 'Stay signed in when you are not using it',
  'orders:read': 'See orders',
  'orders:write': 'Place and change orders',
};

export function consentPage(opts: {
  confirmAction: string;
  abortAction: string;
  clientName: string;
  scopes: readonly string[];
}): string {
  const items = opts.scopes
    .map((s) => `<li>${escapeHtml(SCOPE_DESCRIPTIONS[s] ?? s)} <small>(<code>${escapeHtml(s)}</code>)</small></li>`)
    .join('\n  ');
  return layout(
    'Allow access',
    `<h1>Allow access?</h1>
<p><strong>${escapeHtml(opts.clientName)}</strong> asks to:</p>
<ul>
  ${items}
</ul>
<div class="actions">
  <form method="post" action="${escapeHtml(opts.confirmAction)}"><button type="submit">Allow</button></form>
  <form method="post" action="${escapeHtml(opts.abortAction)}"><button type="submit" class="secondary">Cancel</button></form>
</div>`,
  );
}

/** `form` is oidc-provider's hidden form (it carries the CSRF token); the buttons submit it by id. */
export function logoutPage(opts: { form: string; host: string }): string {
  return layout(
    'Sign out',
    `<h1>Sign out?</h1>
<p>Do you want to sign out of <strong>${escapeHtml(opts.host)}</strong>?</p>
${opts.form}
<div class="actions">
  <button type="submit" form="op.logoutForm" name="logout" value="yes">Yes, sign me out</button>
  <button type="submit" form="op.logoutForm" class="secondary">No, stay signed in</button>
</div>`,
  );
}

/** Submits the logout form's "yes" button once loaded; scripts are not needed to do it by hand. */
export const AUTO_SIGN_OUT_SCRIPT = "document.getElementById('sign-out').click();";

/**
 * RP-initiated logout that needs no question: the relying party sent an ID token of this very session. The page
 * submits oidc-provider's form (and its CSRF token) itself; without JavaScript it is one button.
 */
export function signingOutPage(opts: { form: string }): string {
  return layout(
    'Signing out',
    `<h1>Signing out…</h1>
${opts.form}
<noscript><p>JavaScript is off: press the button to finish signing out.</p></noscript>
<div class="actions">
  <button type="submit" id="sign-out" form="op.logoutForm" name="logout" value="yes">Continue</button>
</div>
<script>${AUTO_SIGN_OUT_SCRIPT}</script>`,
  );
}

export function loggedOutPage(clientName?: string): string {
  return layout(
    'Signed out',
    `<h1>You are signed out</h1>
<p>${clientName ? `You have signed out of <strong>${escapeHtml(clientName)}</strong>. ` : ''}You can close this page.</p>`,
  );
}

export function errorPage(opts: {
  title: string;
  message: string;
  detail?: string;
  /** A way on, such as "Sign in again". */
  link?: { href: string; text: string };
}): string {
  return layout(
    opts.title,
    `<h1>${escapeHtml(opts.title)}</h1>
<p>${escapeHtml(opts.message)}</p>
${opts.detail ? `<p><small>${escapeHtml(opts.detail)}</small></p>` : ''}
${opts.link ? `<p><a href="${escapeHtml(opts.link.href)}">${escapeHtml(opts.link.text)}</a></p>` : ''}`,
  );
}

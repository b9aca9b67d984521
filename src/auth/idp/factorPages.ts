// The embedded IdP's pages for second factors: the step after the password, the account page where factors are
// added, and the passkey button the sign-in page carries. Plain HTML; only passkeys need the one script.

import { escapeHtml } from '../../html.js';
import { layout, PAGE_POLICY } from './pages.js';

/** Pages with a passkey button load the WebAuthn script from this IdP (`/assets/…`), and no other script. */
export const SCRIPT_PAGE_POLICY = `${PAGE_POLICY}; script-src 'self'`;

/** Options for the browser, as data: `<` escaped, so nothing in them can end the element early. */
function jsonData(id: string, value: unknown): string {
  return `<script type="application/json" id="${id}">${JSON.stringify(value).replace(/</g, '\\u003c')}</script>`;
}

function scripts(assets: string): string {
  return `<script src="${escapeHtml(assets)}/simplewebauthn-browser.js"></script>
<script src="${escapeHtml(assets)}/passkeys.js"></script>`;
}

/**
 * A form whose button runs a WebAuthn ceremony (passkeys.js): the answer goes into the hidden `response` field and
 * the form is submitted, so the server answers with a page or a redirect as for any form.
 */
export function passkeyForm(opts: {
  action: string;
  ceremony: 'authenticate' | 'register';
  options: unknown;
  label: string;
  assets: string;
  hidden?: Readonly<Record<string, string>>;
  /** Fields the person fills in before the ceremony (markup of this module's own). */
  fields?: string;
}): string {
  const hidden = Object.entries(opts.hidden ?? {})
    .map(([name, value]) => `<input type="hidden" name="${escapeHtml(name)}" value="${escapeHtml(value)}">`)
    .join('');
  return `<form method="post" action="${escapeHtml(opts.action)}">
  ${hidden}${opts.fields ?? ''}<input type="hidden" name="response" value="">
  <button type="submit" data-webauthn="${opts.ceremony}" data-options="webauthn-options" class="secondary">${escapeHtml(opts.label)}</button>
  <p id="webauthn-status" class="error" role="status"></p>
</form>
${jsonData('webauthn-options', opts.options)}
${scripts(opts.assets)}`;
}

/** Signing in with a passkey alone, and the way back to the password. */
export function passkeyPage(opts: {
  clientName: string;
  passkey: { action: string; options: unknown; assets: string };
  passwordUrl: string;
  error?: string;
}): string {
  return layout(
    'Sign in with a passkey',
    `<h1>Sign in with a passkey</h1>
<p>to continue to <strong>${escapeHtml(opts.clientName)}</strong>, with a passkey you added on your account page. Your device asks you to unlock it.</p>
${opts.error ? `<p id="passkey-error" class="error" role="alert">${escapeHtml(opts.error)}</p>` : ''}
${passkeyForm({ ...opts.passkey, ceremony: 'authenticate', label: 'Use a passkey' })}
<p><a href="${escapeHtml(opts.passwordUrl)}">Sign in with your password instead</a></p>`,
  );
}

export function secondFactorPage(opts: {
  name: string;
  clientName: string;
  totpAction?: string;
  passkey?: { action: string; options: unknown; assets: string };
  abortAction: string;
  accountUrl: string;
  error?: string;
}): string {
  const invalid = opts.error ? ' aria-invalid="true" aria-describedby="factor-error"' : '';
  const totp = opts.totpAction
    ? `<form method="post" action="${escapeHtml(opts.totpAction)}">
  <label for="code">Code from your authenticator app</label>
  <input id="code" name="code" type="text" inputmode="numeric" autocomplete="one-time-code" pattern="[0-9]{6}" maxlength="6" required autofocus${invalid}>
  <button type="submit">Verify</button>
</form>`
    : '';
  const passkey = opts.passkey
    ? passkeyForm({ ...opts.passkey, ceremony: 'authenticate', label: 'Use a passkey' })
    : '';
  const none =
    !totp && !passkey
      ? `<p>This account has no second factor yet. Add an authenticator app or a passkey on <a href="${escapeHtml(opts.accountUrl)}">your account page</a>, then sign in again.</p>`
      : '';
  return layout(
    'Verify it is you',
    `<h1>Verify it is you</h1>
<p><strong>${escapeHtml(opts.clientName)}</strong> asks for a second factor for <strong data-testid="account">${escapeHtml(opts.name)}</strong>.</p>
${opts.error ? `<p id="factor-error" class="error" role="alert">${escapeHtml(opts.error)}</p>` : ''}
${totp}
${passkey}
${none}
<form method="post" action="${escapeHtml(opts.abortAction)}"><button type="submit" class="secondary">Cancel</button></form>`,
  );
}

export interface AccountView {
  readonly name: string;
  readonly username: string;
  readonly csrf: string;
  readonly actions: { readonly totp: string; readonly passkeys: string };
  readonly assets: string;
  readonly totpEnrolled: boolean;
  readonly passkeyCount: number;
  /** A new secret to enrol (absent when the page may not change factors). */
  readonly enrolment?: { readonly secret: string; readonly qrSvg: string };
  /** Registration options for a new passkey (absent when the page may not change factors). */
  readonly registration?: unknown;
  /** The first factor is bound with an enrolment code: the forms ask for it. */
  readonly codeNeeded?: boolean;
  /** The account has a factor, but this session did not use one: how to verify first. */
  readonly verifyFirstUrl?: string;
  /** The sign-in is too old to change factors: how to sign in again, and within what time (`15 minutes`). */
  readonly signInAgain?: { readonly url: string; readonly within: string };
  readonly message?: string;
  readonly error?: string;
}

/** The enrolment code's field, in each form that binds a first factor. */
const codeField = (form: string) => `<label for="enrolment-code-${form}">Enrolment code from your administrator</label>
  <input id="enrolment-code-${form}" name="enrolment_code" type="text" autocomplete="off" spellcheck="false" maxlength="64" required>
  `;

export function accountPage(view: AccountView): string {
  const code = (form: string) => (view.codeNeeded ? codeField(form) : '');
  const enrol = view.enrolment
    ? `<p>Scan this code with an authenticator app, or type the secret into it, then enter the code it shows.</p>
<div class="qr" data-testid="totp-qr">${view.enrolment.qrSvg}</div>
<p>Secret: <code data-testid="totp-secret">${escapeHtml(view.enrolment.secret)}</code></p>
<form method="post" action="${escapeHtml(view.actions.totp)}">
  <input type="hidden" name="csrf" value="${escapeHtml(view.csrf)}">
  <input type="hidden" name="secret" value="${escapeHtml(view.enrolment.secret)}">
  ${code('totp')}  <label for="code">Code from the app</label>
  <input id="code" name="code" type="text" inputmode="numeric" autocomplete="one-time-code" pattern="[0-9]{6}" maxlength="6" required>
  <button type="submit">${view.totpEnrolled ? 'Replace the authenticator app' : 'Turn on'}</button>
</form>`
    : '';
  const register = view.registration
    ? passkeyForm({
        action: view.actions.passkeys,
        ceremony: 'register',
        options: view.registration,
        label: 'Add a passkey',
        assets: view.assets,
        hidden: { csrf: view.csrf },
        fields: code('passkey'),
      })
    : '';
  const verifyFirst = view.verifyFirstUrl
    ? `<p>To add or replace a factor, first <a href="${escapeHtml(view.verifyFirstUrl)}">verify with a second factor</a>.</p>`
    : view.signInAgain
      ? `<p>To add or replace a factor, first <a href="${escapeHtml(view.signInAgain.url)}">sign in again</a>: changing factors needs a sign-in within the last ${escapeHtml(view.signInAgain.within)}.</p>`
      : '';
  const firstFactor = view.codeNeeded
    ? `<p data-testid="enrolment-code-needed">Your first factor needs the enrolment code your administrator gives you.</p>`
    : '';
  // Its URL holds no secret, and its forms are checked by their Origin: the page keeps the site's referrer policy,
  // under which a browser sends its real origin (with no-referrer it would send `null`).
  return layout(
    'Your account',
    `<h1>Your account</h1>
<p>Signed in to the identity provider as <strong data-testid="account">${escapeHtml(view.name)}</strong> (<code>${escapeHtml(view.username)}</code>).</p>
${view.message ? `<p role="status" data-testid="message">${escapeHtml(view.message)}</p>` : ''}
${view.error ? `<p class="error" role="alert">${escapeHtml(view.error)}</p>` : ''}
${verifyFirst}
${firstFactor}
<h2>Authenticator app</h2>
<p data-testid="totp-state">${view.totpEnrolled ? 'On: sign-ins that need a second factor ask for its code.' : 'Off.'}</p>
${enrol}
<h2>Passkeys</h2>
<p data-testid="passkey-count">${view.passkeyCount === 0 ? 'None yet.' : `${view.passkeyCount} registered.`} A passkey signs you in by itself, or as the second factor after your password.</p>
${register}`,
    'Orders sign-in',
  );
}

export function notSignedInPage(signInUrl: string): string {
  return layout(
    'Your account',
    `<h1>Your account</h1>
<p>You are not signed in to the identity provider.</p>
<p><a href="${escapeHtml(signInUrl)}">Sign in</a>, then come back to this page.</p>`,
  );
}

/**
 * The browser half of passkeys: a button with `data-webauthn` runs the ceremony with the options in the element its
 * `data-options` names (SimpleWebAuthn's browser bundle, loaded before), puts the answer into its form's `response`
 * field and submits the form.
 */
export const PASSKEY_SCRIPT = `(() => {
  const { browserSupportsWebAuthn, startAuthentication, startRegistration } = window.SimpleWebAuthnBrowser;
  for (const button of document.querySelectorAll('button[data-webauthn]')) {
    const form = button.form;
    const status = form.querySelector('[role=status]');
    if (!browserSupportsWebAuthn()) {
      button.disabled = true;
      status.textContent = 'This browser cannot use passkeys.';
      continue;
    }
    button.addEventListener('click', async (event) => {
      event.preventDefault();
      // The fields asked before the ceremony (an enrolment code) are checked first, as a plain submit would.
      if (!form.reportValidity()) return;
      status.textContent = '';
      const optionsJSON = JSON.parse(document.getElementById(button.dataset.options).textContent);
      try {
        const answer = button.dataset.webauthn === 'register'
          ? await startRegistration({ optionsJSON })
          : await startAuthentication({ optionsJSON });
        form.elements.response.value = JSON.stringify(answer);
        form.submit();
      } catch (error) {
        status.textContent = 'The passkey did not answer: ' + (error && error.message ? error.message : error);
      }
    });
  }
})();
`;

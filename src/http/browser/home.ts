import type { Request, RequestHandler } from 'express';
import { layout, PAGE_POLICY } from '../../auth/idp/pages.js';
import { csrfTokenFor, type Session } from '../../auth/sessions.js';
import { escapeHtml } from '../../html.js';
import { ACR, isStaff, meetsStepUp, type StepUpRule, type User } from '../../domain/policy.js';
import { readCookie } from '../middleware/index.js';

/** What API clients get at `/`: the entry points. */
const ENTRY_POINTS = {
  service: 'orders-api',
  graphql: '/graphql',
  rest: '/v1/orders',
  openapi: '/v1/openapi.json',
  signIn: '/auth/login',
  session: '/auth/session',
} as const;

export interface HomeDeps {
  readonly sessionCookie: string;
  /** The live session behind a cookie (restarting its idle clock), or null. */
  touch(id: string): Promise<Session | null>;
  /** Sandbox and GraphiQL are development tools; production serves neither. */
  readonly developmentTools: boolean;
  /** What staff changes ask of a sign-in (RFC 9470); null when the rule is off. */
  readonly stepUp: StepUpRule | null;
}

const LEVEL_NAMES: Readonly<Record<string, string>> = {
  [ACR.password]: 'password',
  [ACR.mfa]: 'second factor',
};

/** The session's sign-in level as a person reads it, with the `acr` and `amr` behind it. */
function levelOf(user: User): string {
  if (!user.acr) return 'not stated by the identity provider';
  const name = LEVEL_NAMES[user.acr];
  const methods = user.amr?.length ? ` · <code>${user.amr.map(escapeHtml).join(' ')}</code>` : '';
  return `${name ? `${escapeHtml(name)} ` : ''}<small>(<code>${escapeHtml(user.acr)}</code>${methods})</small>`;
}

/**
 * For staff whose sign-in would be refused a change (RFC 9470): the way to step up, which signs in again asking the
 * issuer for the rule's acr_values and max_age, and comes back here.
 */
function stepUpOffer(user: User, rule: StepUpRule | null): string {
  if (!rule || !isStaff(user) || meetsStepUp(user, rule)) return '';
  const query = new URLSearchParams({ acr_values: rule.acrValues.join(' '), max_age: String(rule.maxAgeSeconds) });
  return `<p data-testid="step-up">Changing orders as staff needs a sign-in with a second factor within the last ${rule.maxAgeSeconds % 60 ? `${rule.maxAgeSeconds} seconds` : `${rule.maxAgeSeconds / 60} minutes`}.</p>
<p><a href="/auth/login?${escapeHtml(query.toString())}">Verify with a second factor</a></p>`;
}

function signedInBody(session: Session, csrfToken: string, tools: boolean, rule: StepUpRule | null): string {
  const { user } = session;
  const who = user.name ? `${escapeHtml(user.name)} <small>(<code>${escapeHtml(user.subject)}</code>)</small>` : '';
  const scopes = [...user.scopes].map((s) => `<code>${escapeHtml(s)}</code>`).join(' ') || 'none';
  return `<h1>Orders API</h1>
<p>Signed in as <strong data-testid="user">${who || `<code>${escapeHtml(user.subject)}</code>`}</strong></p>
<dl>
  <dt>Email</dt><dd>${escapeHtml(user.email ?? '—')}</dd>
  <dt>Role</dt><dd data-testid="role">${isStaff(user) ? 'staff' : 'customer'}</dd>
  <dt>Scopes</dt><dd data-testid="scopes">${scopes}</dd>
  <dt>Sign-in</dt><dd data-testid="level">${levelOf(user)}</dd>
  <dt>Session ends</dt><dd><time datetime="${escapeHtml(session.expiresAt.toISOString())}">${escapeHtml(session.expiresAt.toUTCString())}</time> at the latest</dd>
</dl>
${stepUpOffer(user, rule)}
${tools ? `${TOOLS}\n<p class="hint">Both send this session's cookie, so queries run as you.</p>` : ''}
<form method="post" action="/auth/logout">
  <input type="hidden" name="csrf" value="${escapeHtml(csrfToken)}">
  <button type="submit">Sign out</button>
</form>`;
}

const TOOLS = `<ul>
  <li><a href="/graphql">Apollo Sandbox</a> (<code>/graphql</code>; loads from Apollo's CDN)</li>
  <li><a href="/graphiql">GraphiQL</a> (<code>/graphiql</code>; works offline)</li>
</ul>`;

function signedOutBody(tools: boolean): string {
  return `<h1>Orders API</h1>
<p>You are not signed in.</p>
<p><a href="/auth/login">Sign in</a></p>
${tools ? TOOLS : ''}
<p class="hint">API clients: the entry points are listed as JSON for <code>Accept: application/json</code>.</p>`;
}

async function currentSession(req: Request, deps: HomeDeps) {
  const id = readCookie(req.headers.cookie, deps.sessionCookie);
  const session = id ? await deps.touch(id) : null;
  return session && id ? { id, session } : null;
}

/**
 * `/`: the entry points as JSON for API clients, and for browsers (who ask for text/html first) a page saying who is
 * signed in, with a sign-out form carrying the session's CSRF token. Either way it is per-user: never stored.
 */
export function homeRoute(deps: HomeDeps): RequestHandler {
  return async (req, res) => {
    res.setHeader('Cache-Control', 'no-store');
    res.vary('Accept');
    if (req.accepts(['json', 'html']) !== 'html') {
      res.json(ENTRY_POINTS);
      return;
    }
    const current = await currentSession(req, deps);
    const body = current
      ? signedInBody(current.session, csrfTokenFor(current.id), deps.developmentTools, deps.stepUp)
      : signedOutBody(deps.developmentTools);
    res
      .set('Content-Security-Policy', PAGE_POLICY)
      .type('html')
      .send(layout(current ? 'Signed in' : 'Home', body, 'Orders API'));
  };
}

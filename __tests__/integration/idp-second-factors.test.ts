import assert from 'node:assert/strict';
import { afterAll, beforeAll, describe, test } from '@jest/globals';
import { DEMO_TOTP_SECRETS } from '../../src/auth/idp/demoTotp.js';
import { SIGNIN_LIMITS } from '../../src/auth/idp/signinThrottle.js';
import { createLogger } from '../../src/logger.js';
import { answerTotp, enrolmentCode, formAction, totpCode } from '../helpers/secondFactor.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { SoftAuthenticator, webauthnOptions } from '../helpers/softAuthenticator.js';
import { location, WebClient } from '../helpers/webClient.js';

const MFA = 'urn:orders:acr:mfa';
const CAROL = DEMO_TOTP_SECRETS.carol!;

interface SessionInfo {
  sub: string;
  acr: string | null;
  amr: string[] | null;
  authTime: string | null;
}
type CreationOptions = Parameters<SoftAuthenticator['register']>[0];
type RequestOptions = Parameters<SoftAuthenticator['assert']>[0];

const NO_CODE =
  'Adding your first factor needs the enrolment code your administrator gave you: this one is missing, wrong, expired or already used.';
const VERIFY_FIRST = 'Verify with your second factor before you change your factors.';
/** The message of a refusal page (`<p>` after its heading). */
const refusalOf = (html: string) => /<\/h1>\s*<p>([^<]*)<\/p>/.exec(html)?.[1]?.replace(/&#39;/g, "'") ?? null;

/** The text of a page's alert (the error it shows), or null. */
const alertOf = (html: string) => /role="alert">([^<]*)</.exec(html)?.[1]?.replace(/&#39;/g, "'") ?? null;

describe('the embedded IdP’s second factors refuse bad input clearly, and lock out no one else', () => {
  let server: TestServer;
  let base: string;
  let rp: string;
  /** Every line the server logs, down to debug, through the real logger (its redaction and serializers). */
  const logLines: string[] = [];

  beforeAll(async () => {
    const logger = createLogger('debug', { destination: { write: (line: string) => void logLines.push(line) } });
    server = await startTestServer({}, { logger });
    base = server.running.publicUrl;
    rp = new URL(base).origin;
  });
  afterAll(() => server.close());

  /** Follows redirects until a page answers; a redirect to the app's callback is taken, making the session. */
  async function settle(browser: WebClient, res: Response): Promise<Response> {
    for (let step = 0; step < 12 && res.status >= 300 && res.status < 400; step++)
      res = await browser.get(location(res));
    return res;
  }

  /** /auth/login (with a step-up query) as far as the IdP's first page. */
  async function startAt(browser: WebClient, query = '', at = base): Promise<Response> {
    return settle(browser, await browser.get(`${at}/auth/login${query}`));
  }

  async function password(browser: WebClient, page: Response, user: string): Promise<Response> {
    const action = formAction(await page.clone().text(), page.url, 'login');
    assert.ok(action, 'a sign-in form');
    return settle(browser, await browser.post(action, { username: user, password: user }));
  }

  /** At the TOTP step of a sign-in asking for the MFA level. */
  async function atTotpStep(user: string, at = base): Promise<{ browser: WebClient; action: URL }> {
    const browser = new WebClient();
    const page = await password(browser, await startAt(browser, `?acr_values=${MFA}`, at), user);
    const action = formAction(await page.text(), page.url, 'totp');
    assert.ok(action, `${user} is asked for a code`);
    return { browser, action };
  }

  const sessionOf = async (browser: WebClient, at = base) => {
    const res = await browser.get(`${at}/auth/session`);
    return res.status === 200 ? ((await res.json()) as SessionInfo) : null;
  };

  async function signedInWithPassword(user: string): Promise<WebClient> {
    const browser = new WebClient();
    const home = await password(browser, await startAt(browser), user);
    assert.equal(home.status, 200);
    assert.equal((await sessionOf(browser))?.sub, user);
    return browser;
  }

  const accountPage = async (browser: WebClient, at = base) => {
    const res = await browser.get(`${at}/idp/account`);
    const html = await res.text();
    return { res, html, csrf: /name="csrf" value="([^"]+)"/.exec(html)?.[1] ?? '' };
  };

  describe('forms with more fields than they have, and addresses that name no interaction', () => {
    const SECRET = 'Hunter2-SECRET-PW';
    /** A form of `count` fields: the username and password, then padding. */
    const fieldsOf = (count: number) => ({
      username: 'nobody',
      password: SECRET,
      ...Object.fromEntries(Array.from({ length: count - 2 }, (_, i) => [`x${i}`, '1'])),
    });

    test('every sign-in step refuses one field more than its form reads with 413 and a page, 8 at once too; the password is in no log line', async () => {
      const { browser, action: totp } = await atTotpStep('carol');
      const uid = totp.pathname.split('/').at(-2)!;
      const at = (step: string) => new URL(`/idp/interaction/${uid}/${step}`, base);
      // The sign-in form reads 10 fields: at the limit it is read (a wrong password: 401), one past it is not.
      const signIn = new WebClient();
      const login = formAction(await (await startAt(signIn)).text(), base, 'login')!;
      assert.equal((await signIn.post(login, fieldsOf(10))).status, 401);
      // The second-factor forms read 5: at the limit the passkey form is read (and finds no answer in it).
      assert.equal((await browser.post(at('passkey'), fieldsOf(5))).status, 400);
      const refusals = [
        [login, 11],
        [at('confirm'), 11],
        [at('abort'), 11],
        [totp, 6],
        [at('passkey'), 6],
      ] as const;
      for (const [url, count] of refusals) {
        const res = await browser.post(url, fieldsOf(count));
        assert.equal(res.status, 413, url.pathname);
        assert.match(res.headers.get('content-type')!, /^text\/html/);
        assert.match(await res.text(), /The form sent more than a sign-in ever needs, so it was not read\./);
      }
      const together = await Promise.all(Array.from({ length: 8 }, () => browser.post(login, fieldsOf(30))));
      assert.deepEqual(
        together.map((r) => r.status),
        Array(8).fill(413),
      );
      // The account page's forms read 5 fields, the app's sign-out form 5: one past is 413 there too.
      const account = await browser.post(`${base}/idp/account/totp`, fieldsOf(6), { origin: rp });
      assert.equal(account.status, 413);
      assert.match(await account.text(), /The form sent more than adding a factor ever needs, so it was not read\./);
      const signOut = await browser.post(`${base}/auth/logout`, fieldsOf(6));
      assert.equal(signOut.status, 413);
      assert.equal(signOut.headers.get('content-type'), 'application/problem+json; charset=utf-8');
      // Nothing was spent: carol's sign-in still waits for her code.
      const page = await browser.get(new URL(`/idp/interaction/${uid}`, base));
      assert.equal(page.status, 200);
      assert.ok(formAction(await page.text(), page.url, 'totp'));
      assert.ok(logLines.length > 0);
      assert.deepEqual(
        logLines.filter((line) => line.includes(SECRET)),
        [],
      );
      assert.deepEqual(
        logLines.filter((line) => /"level":(50|60)/.test(line)),
        [],
      );
    });

    test('an interaction path that is not percent-encoded UTF-8 is 400 and a page, on every step, GET or POST', async () => {
      for (const path of ['', '/login', '/totp', '/confirm', '/abort', '/passkey']) {
        for (const method of ['GET', 'POST'] as const) {
          const url = `${base}/idp/interaction/%ZZ${path}`;
          const browser = new WebClient();
          const res = method === 'GET' ? await browser.get(url) : await browser.post(url, { code: '123456' });
          assert.equal(res.status, 400, `${method} ${path}`);
          assert.match(await res.text(), /This sign-in address is not valid\./, `${method} ${path}`);
        }
      }
      assert.deepEqual(
        logLines.filter((line) => /"level":(50|60)/.test(line)),
        [],
      );
    });
  });

  describe('TOTP', () => {
    test('alice enrols an authenticator app on the account page: a QR code and the secret, confirmed by a code', async () => {
      const browser = await signedInWithPassword('alice');
      const { res, html, csrf } = await accountPage(browser);
      assert.equal(res.status, 200);
      assert.match(res.headers.get('content-security-policy')!, /script-src 'self'/);
      assert.match(html, /<div class="qr" data-testid="totp-qr"><svg xmlns="http:\/\/www.w3.org\/2000\/svg"/);
      assert.match(html, /<input id="enrolment-code-totp" name="enrolment_code" type="text"/);
      const secret = /data-testid="totp-secret">([A-Z2-7]+)</.exec(html)![1]!;
      // Her administrator's code, typed as a person might: lower case, spaces for hyphens.
      const code = (await enrolmentCode(base, 'alice')).toLowerCase().replace(/-/g, ' ');
      const form = { csrf, secret, enrolment_code: code };
      const wrong = await browser.post(`${base}/idp/account/totp`, { ...form, code: '000000' }, { origin: rp });
      assert.equal(wrong.status, 401);
      assert.match(alertOf(await wrong.text())!, /^That code does not match the new secret/);
      // A wrong app code did not spend the enrolment code. Sent twice at once, it binds one secret and refuses the
      // other (the code spent by the first, or the account now has a factor that this session did not use).
      const second = await accountPage(browser);
      const other = /data-testid="totp-secret">([A-Z2-7]+)</.exec(second.html)![1]!;
      const [first, racing] = await Promise.all(
        [secret, other].map(async (s) =>
          browser.post(
            `${base}/idp/account/totp`,
            { csrf, secret: s, enrolment_code: code, code: await totpCode(s) },
            { origin: rp },
          ),
        ),
      );
      assert.deepEqual([first.status, racing.status].sort(), [200, 403]);
      const [on, refused] = first.status === 200 ? [first, racing] : [racing, first];
      const bound = on === first ? secret : other;
      assert.match(await on.text(), /data-testid="totp-state">On:/);
      assert.ok([NO_CODE, VERIFY_FIRST].includes(refusalOf(await refused.text())!));

      // The code that confirmed the secret is spent; the next one signs alice in with two factors.
      const { browser: next, action } = await atTotpStep('alice');
      const done = await settle(next, await next.post(action, { code: await totpCode(bound, 1) }));
      assert.equal(done.status, 200);
      assert.deepEqual(await sessionOf(next), { ...(await sessionOf(next))!, acr: MFA, amr: ['pwd', 'otp', 'mfa'] });
    });

    test('a wrong code is refused with the form again, and no session', async () => {
      const { browser, action } = await atTotpStep('alice');
      for (const code of ['123456', '12345', 'abcdef', '1'.repeat(17), '']) {
        const res = await browser.post(action, { code });
        assert.equal(res.status, 401, code);
        const html = await res.text();
        assert.equal(alertOf(html), 'Wrong code. Enter the 6 digits your authenticator app shows now.');
        assert.ok(formAction(html, res.url, 'totp'), 'the form is shown again');
      }
      assert.equal(await sessionOf(browser), null);
    });

    test('8 sign-ins send one code at once: one signs in, seven are told it was already used; sent again later, it is refused too', async () => {
      const attempts = await Promise.all(Array.from({ length: 8 }, () => atTotpStep('carol')));
      const code = await totpCode(CAROL);
      const answers = await Promise.all(attempts.map(({ browser, action }) => browser.post(action, { code })));
      assert.deepEqual(answers.map((r) => r.status).sort(), [303, 401, 401, 401, 401, 401, 401, 401]);
      for (const res of answers.filter((r) => r.status === 401)) {
        assert.equal(
          alertOf(await res.text()),
          'This code was already used. Wait for the next code in your authenticator app.',
        );
      }
      const winner = attempts[answers.findIndex((r) => r.status === 303)]!;
      await settle(
        winner.browser,
        answers.find((r) => r.status === 303)!,
      );
      assert.deepEqual((await sessionOf(winner.browser))?.amr, ['pwd', 'otp', 'mfa']);

      const replay = await atTotpStep('carol');
      const again = await replay.browser.post(replay.action, { code });
      assert.equal(again.status, 401);
      assert.equal(
        alertOf(await again.text()),
        'This code was already used. Wait for the next code in your authenticator app.',
      );
    });
  });

  describe('passkeys', () => {
    const bob = new SoftAuthenticator('');

    beforeAll(() => {
      Object.assign(bob, { origin: rp });
    });

    /** Bob's sign-in page (or second-factor page), its options, and where the answer goes. */
    async function passkeyStep(query = '', user?: string) {
      const browser = new WebClient();
      let page = await startAt(browser, query);
      if (user) page = await password(browser, page, user);
      else {
        // The sign-in page's second button: a passkey instead of the password.
        const login = formAction(await page.text(), page.url, 'login')!;
        page = await settle(browser, await browser.post(login, { method: 'passkey' }));
      }
      const html = await page.text();
      const action = formAction(html, page.url, 'passkey');
      assert.ok(action, 'a passkey form');
      return { browser, action, options: webauthnOptions<RequestOptions>(html) };
    }

    test('a client that insists on the MFA level (essential acr) and an account without a second factor: unmet_authentication_requirements', async () => {
      const browser = new WebClient();
      const claims = JSON.stringify({ id_token: { acr: { essential: true, values: [MFA] } } });
      const authorize = new URL(`${server.running.app.issuer}/auth`);
      authorize.search = new URLSearchParams({
        client_id: 'orders-mobile',
        response_type: 'code',
        redirect_uri: 'http://127.0.0.1/callback',
        scope: 'openid',
        state: 'essential',
        code_challenge: 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM',
        code_challenge_method: 'S256',
        claims,
      }).toString();
      let res = await settle(browser, await browser.get(authorize));
      res = await browser.post(formAction(await res.text(), res.url, 'login')!, { username: 'bob', password: 'bob' });
      for (let step = 0; step < 8 && location(res).host !== '127.0.0.1'; step++) res = await browser.get(location(res));
      const back = location(res);
      assert.equal(back.searchParams.get('error'), 'unmet_authentication_requirements');
      assert.equal(back.searchParams.get('state'), 'essential');
    });

    test('bob, signed in with his password alone, binds a first passkey only with the enrolment code issued to him: none, a wrong one, alice’s and a replaced one are refused (403), and that passkey cannot sign in', async () => {
      const stranger = await new WebClient().get(`${base}/idp/account`);
      assert.equal(stranger.status, 401);
      assert.match(await stranger.text(), /href="http:\/\/localhost:\d+\/auth\/login\?returnTo=%2Fidp%2Faccount"/);

      const browser = await signedInWithPassword('bob');
      const { html, csrf } = await accountPage(browser);
      const secret = /data-testid="totp-secret">([A-Z2-7]+)</.exec(html)![1]!;
      const options = webauthnOptions<CreationOptions>(html);
      assert.equal(options.rp.id, new URL(base).hostname);
      const refuse = async (form: Record<string, string>, origin: string, message: string) => {
        const res = await browser.post(`${base}/idp/account/passkeys`, form, { origin });
        assert.equal(res.status, 403, message);
        assert.ok((await res.text()).includes(`<p>${message}</p>`), message);
      };
      await refuse({ csrf, response: '{}' }, 'http://evil.example', 'This form must be sent from this site.');
      await refuse(
        { csrf: 'forged', response: '{}' },
        rp,
        'This form is out of date or did not come from your account page. Open the page again.',
      );

      // The attack of issue 37: a stolen password registers the thief's passkey. Refused without bob's own code.
      const thief = new SoftAuthenticator(rp);
      const attempt = (enrolment?: string) =>
        browser.post(
          `${base}/idp/account/passkeys`,
          { csrf, response: thief.register(options), ...(enrolment ? { enrolment_code: enrolment } : {}) },
          { origin: rp },
        );
      const bare = await attempt();
      assert.equal(bare.status, 403);
      assert.equal(refusalOf(await bare.text()), NO_CODE);
      // The page asks for the code.
      assert.match(
        html,
        /<p data-testid="enrolment-code-needed">Your first factor needs the enrolment code your administrator gives you\.<\/p>/,
      );
      assert.match(html, /<input id="enrolment-code-passkey" name="enrolment_code" type="text"/);
      const replaced = await enrolmentCode(base, 'bob');
      const code = await enrolmentCode(base, 'bob');
      for (const enrolment of ['AAAA-BBBB-CCCC-DDDD', await enrolmentCode(base, 'alice'), replaced]) {
        const refused = await attempt(enrolment);
        assert.equal(refused.status, 403, enrolment);
        assert.equal(refusalOf(await refused.text()), NO_CODE);
      }
      const intruder = await passkeyStep();
      const signIn = await intruder.browser.post(intruder.action, { response: thief.assert(intruder.options) });
      assert.equal(signIn.status, 401);
      assert.equal(alertOf(await signIn.text()), 'This passkey is not registered for this account.');
      assert.match((await accountPage(browser)).html, /data-testid="passkey-count">None yet\./);

      const res = await browser.post(
        `${base}/idp/account/passkeys`,
        { csrf, response: bob.register(options), enrolment_code: code },
        { origin: rp },
      );
      const page = await res.text();
      assert.equal(res.status, 200, alertOf(page) ?? '');
      assert.match(page, /data-testid="message">The passkey is registered\./);
      assert.match(page, /data-testid="passkey-count">1 registered\./);
      // The page now asks him to verify first, and the forms of the page he had are refused.
      assert.match(
        page,
        /To add or replace a factor, first <a href="[^"]+acr_values=urn%3Aorders%3Aacr%3Amfa">verify with a second factor<\/a>/,
      );
      const totp = await browser.post(
        `${base}/idp/account/totp`,
        { csrf, secret, code: await totpCode(secret) },
        { origin: rp },
      );
      assert.equal(totp.status, 403);
      assert.equal(refusalOf(await totp.text()), VERIFY_FIRST);
    });

    test('enrolment codes are issued to the directory client alone, for a user who exists; anything else is refused clearly', async () => {
      const issue = (form: Record<string, string>, headers: Record<string, string> = {}) =>
        new WebClient().post(`${base}/idp/enrolment-codes`, form, headers);
      const basic = (id: string, secret: string) => ({
        authorization: `Basic ${Buffer.from(`${id}:${secret}`).toString('base64')}`,
      });
      const directory = basic('directory', 'directory-secret');
      const ok = await issue({ username: ' Bob ' }, directory);
      assert.equal(ok.status, 201);
      assert.equal(ok.headers.get('cache-control'), 'no-store');
      const body = (await ok.json()) as { username: string; code: string; expiresAt: string };
      assert.equal(body.username, 'bob');
      assert.match(body.code, /^[A-Z2-9]{4}(-[A-Z2-9]{4}){3}$/);
      // A day from now, by the server's clock within a minute of this one.
      assert.ok(Math.abs(Date.parse(body.expiresAt) - Date.now() - 86_400_000) < 60_000, body.expiresAt);
      const refusals: [Record<string, string>, Record<string, string>, number, object][] = [
        [
          { username: 'bob' },
          {},
          401,
          { error: 'invalid_client', error_description: 'authenticate as the directory client (HTTP Basic)' },
        ],
        [
          { username: 'bob' },
          basic('directory', 'wrong'),
          401,
          { error: 'invalid_client', error_description: 'authenticate as the directory client (HTTP Basic)' },
        ],
        [
          { username: 'bob' },
          basic('orders-web', 'orders-web-secret'),
          401,
          { error: 'invalid_client', error_description: 'authenticate as the directory client (HTTP Basic)' },
        ],
        [
          {},
          directory,
          400,
          { error: 'invalid_request', error_description: 'username is required: the user name the code is for' },
        ],
        [
          { username: 'mallory' },
          directory,
          404,
          { error: 'unknown_user', error_description: 'no user has this user name' },
        ],
        [
          { username: 'bob', a: '1', b: '2' },
          directory,
          413,
          { error: 'invalid_request', error_description: 'the form is larger than one username' },
        ],
      ];
      for (const [form, headers, status, answer] of refusals) {
        const res = await issue(form, headers);
        assert.equal(res.status, status, JSON.stringify([form, headers]));
        assert.deepEqual(await res.json(), answer);
        if (status === 401) assert.equal(res.headers.get('www-authenticate'), 'Basic realm="orders-idp"');
      }
      const get = await new WebClient().get(`${base}/idp/enrolment-codes`, directory);
      assert.equal(get.status, 405);
      assert.equal(get.headers.get('allow'), 'POST');
      assert.deepEqual(await get.json(), {
        error: 'invalid_request',
        error_description: 'enrolment codes are issued with POST',
      });
    });

    test('he signs in with it alone (user verified): acr MFA, amr hwk user mfa', async () => {
      const { browser, action, options } = await passkeyStep();
      assert.deepEqual(options.rpId, new URL(base).hostname);
      const done = await settle(browser, await browser.post(action, { response: bob.assert(options) }));
      assert.equal(done.status, 200);
      const session = await sessionOf(browser);
      assert.equal(session?.sub, 'bob');
      assert.equal(session?.acr, MFA);
      assert.deepEqual(session?.amr, ['hwk', 'user', 'mfa']);
    });

    test('and as the second factor after his password: amr pwd hwk user mfa', async () => {
      const { browser, action, options } = await passkeyStep(`?acr_values=${MFA}`, 'bob');
      const done = await settle(browser, await browser.post(action, { response: bob.assert(options) }));
      assert.equal(done.status, 200);
      assert.deepEqual((await sessionOf(browser))?.amr, ['pwd', 'hwk', 'user', 'mfa']);
    });

    test.each([
      [
        'the wrong origin',
        { origin: 'http://evil.example:4000' },
        /^The passkey answer could not be verified: Unexpected authentication response origin/,
      ],
      ['the wrong RP ID', { rpId: 'evil.example' }, /^The passkey answer could not be verified: Unexpected RP ID hash/],
      [
        'a counter going backwards',
        { counter: 1 },
        /^The passkey answer could not be verified: Response counter value 1 was lower than expected/,
      ],
      [
        'no user verification, alone',
        { userVerified: false },
        /^The passkey answer could not be verified: User verification required/,
      ],
      [
        'another challenge',
        { challenge: 'bm90LWEtY2hhbGxlbmdl' },
        /^This passkey answer is for a challenge that has expired or was already used\.$/,
      ],
    ])('an assertion with %s is refused (401, the reason on the page, no session)', async (_name, bent, reason) => {
      const { browser, action, options } = await passkeyStep();
      const res = await browser.post(action, { response: bob.assert(options, bent) });
      assert.equal(res.status, 401);
      const html = await res.text();
      assert.match(alertOf(html)!, reason);
      assert.ok(formAction(html, res.url, 'passkey'), 'the passkey page again');
      assert.match(html, /<h1>Sign in with a passkey<\/h1>/);
      assert.equal(await sessionOf(browser), null);
    });

    test('a replayed challenge: the assertion that signed bob in, sent again, is refused; so is one for another sign-in', async () => {
      const first = await passkeyStep();
      const answer = bob.assert(first.options);
      await settle(first.browser, await first.browser.post(first.action, { response: answer }));
      assert.equal((await sessionOf(first.browser))?.sub, 'bob');

      const again = await passkeyStep();
      const replayed = await again.browser.post(again.action, { response: answer });
      assert.equal(replayed.status, 401);
      assert.equal(
        alertOf(await replayed.text()),
        'This passkey answer is for a challenge that has expired or was already used.',
      );

      // An answer to this sign-in's own challenge, posted to another sign-in.
      const other = await passkeyStep();
      const crossed = await other.browser.post(other.action, { response: bob.assert(again.options) });
      assert.equal(crossed.status, 401);
      assert.equal(alertOf(await crossed.text()), 'This passkey answer belongs to another sign-in.');
    });

    test('malformed and unknown answers are refused clearly', async () => {
      const stranger = new SoftAuthenticator(rp);
      for (const [response, status, reason] of [
        ['{', 401, 'The passkey answer is not JSON.'],
        ['{"id":"x"}', 401, 'The passkey answer is not a WebAuthn credential (rawId).'],
        ['', 400, 'The passkey sent no answer (passkeys need JavaScript in the browser).'],
      ] as const) {
        const { browser, action } = await passkeyStep();
        const res = await browser.post(action, { response });
        assert.equal(res.status, status, response);
        assert.equal(alertOf(await res.text()), reason);
      }
      const { browser, action, options } = await passkeyStep();
      const res = await browser.post(action, { response: stranger.assert(options) });
      assert.equal(res.status, 401);
      assert.equal(alertOf(await res.text()), 'This passkey is not registered for this account.');
    });

    test('an oversized attestation is refused unread (413): past the size of any answer, and past the body limit', async () => {
      // Bob signs in with his passkey, so the account page lets him add another.
      const { browser, action, options } = await passkeyStep();
      await settle(browser, await browser.post(action, { response: bob.assert(options) }));
      const { html, csrf } = await accountPage(browser);
      const creation = webauthnOptions<CreationOptions>(html);
      const mallory = new SoftAuthenticator(rp);
      for (const [padding, reason] of [
        [8 * 1024, /role="alert">The passkey answer is larger than any passkey sends\.</],
        [100 * 1024, /The form sent more than adding a factor ever needs, so it was not read\./],
      ] as const) {
        const res = await browser.post(
          `${base}/idp/account/passkeys`,
          { csrf, response: mallory.register(creation, { padding }) },
          { origin: rp },
        );
        assert.equal(res.status, 413, String(padding));
        assert.match(await res.text(), reason);
      }
      assert.match((await accountPage(browser)).html, /data-testid="passkey-count">1 registered\./);
    });

    test(`${SIGNIN_LIMITS.user.lockAfter} wrong codes lock bob’s authenticator app (429, even for the right code); alice, carol and bob’s other factors still sign in`, async () => {
      // Bob adds an authenticator app from a session that used his passkey.
      const step = await passkeyStep();
      await settle(step.browser, await step.browser.post(step.action, { response: bob.assert(step.options) }));
      const { html, csrf } = await accountPage(step.browser);
      const secret = /data-testid="totp-secret">([A-Z2-7]+)</.exec(html)![1]!;
      const on = await step.browser.post(
        `${base}/idp/account/totp`,
        { csrf, secret, code: await totpCode(secret) },
        { origin: rp },
      );
      assert.equal(on.status, 200);

      const { browser, action } = await atTotpStep('bob');
      for (let attempt = 1; attempt <= SIGNIN_LIMITS.user.lockAfter; attempt++) {
        const res = await browser.post(action, { code: '000000' });
        assert.equal(res.status, 401, `attempt ${attempt}`);
      }
      const locked = await browser.post(action, { code: await totpCode(secret, 1) });
      assert.equal(locked.status, 429);
      assert.match(locked.headers.get('retry-after')!, /^\d+$/);
      assert.match(alertOf(await locked.text())!, /^Too many wrong codes\. Try again in \d+ (seconds|minutes)\.$/);

      for (const user of ['alice', 'bob', 'carol']) await signedInWithPassword(user);
      const alone = await passkeyStep();
      await settle(alone.browser, await alone.browser.post(alone.action, { response: bob.assert(alone.options) }));
      assert.equal((await sessionOf(alone.browser))?.acr, MFA);
    });
  });
  describe('two replicas of their own: changing factors needs a recent sign-in (STEP_UP_MAX_AGE_S), and second factors have their own throttle', () => {
    /**
     * Two replicas over one database of their own (the same IdP sessions and keys), whose throttles have counted no
     * other test's failures from this address: STEP_UP_MAX_AGE_S is 1 on one, the default 900 on the other.
     */
    let strict: TestServer;
    let lenient: TestServer;
    let strictBase: string;
    let lenientBase: string;

    beforeAll(async () => {
      strict = await startTestServer({ STEP_UP_MAX_AGE_S: '1' });
      lenient = await startTestServer({}, { sameDatabaseAs: strict });
      strictBase = strict.running.publicUrl;
      lenientBase = lenient.running.publicUrl;
    });
    afterAll(async () => {
      await lenient?.close();
      await strict?.close();
    });

    test('one MFA session over a second old adding a passkey: the 1 s replica refuses (401, sign in again, with the password too), the 900 s one accepts', async () => {
      const browser = new WebClient();
      const page = await password(browser, await startAt(browser, `?acr_values=${MFA}`, lenientBase), 'carol');
      assert.equal((await settle(browser, await answerTotp(browser, page, CAROL))).status, 200);
      const session = (await sessionOf(browser, lenientBase))!;
      assert.equal(session.acr, MFA);
      const { html, csrf } = await accountPage(browser, lenientBase);
      const options = webauthnOptions<CreationOptions>(html);
      // The same new passkey, as the browser would answer on each replica's page (the origin is part of the answer).
      const [lenientOrigin, strictOrigin] = [new URL(lenientBase).origin, new URL(strictBase).origin];
      const passkey = new SoftAuthenticator(strictOrigin);
      const forStrict = passkey.register(options);
      const forLenient = passkey.register(options, { origin: lenientOrigin });
      // Until the server's clock, which wrote auth_time in whole seconds, is 2 s past it: over 1 s old however rounded.
      const olderThanOneSecond = Date.parse(session.authTime!) + 2000;
      await new Promise((resolve) => setTimeout(resolve, Math.max(0, olderThanOneSecond - Date.now()) + 50));

      const stale = await browser.post(
        `${strictBase}/idp/account/passkeys`,
        { csrf, response: forStrict },
        { origin: strictOrigin },
      );
      assert.equal(stale.status, 401);
      const refusal = await stale.text();
      assert.equal(
        refusalOf(refusal),
        'Changing your factors needs a sign-in within the last 1 seconds. Sign in again first.',
      );
      const again = /<a href="([^"]+)">Sign in again<\/a>/.exec(refusal)?.[1]?.replace(/&amp;/g, '&');
      assert.equal(
        again,
        `${strictBase}/auth/login?returnTo=%2Fidp%2Faccount&acr_values=urn%3Aorders%3Aacr%3Amfa&max_age=0`,
      );
      // The page there offers no form, only that way, which asks for the password again, not just the second factor.
      const strictPage = await accountPage(browser, strictBase);
      assert.equal(strictPage.res.status, 200);
      assert.equal(strictPage.csrf, '');
      assert.match(
        strictPage.html,
        /To add or replace a factor, first <a href="[^"]+&amp;max_age=0">sign in again<\/a>: changing factors needs a sign-in within the last 1 seconds\./,
      );
      const signInAgain = await settle(browser, await browser.get(again!));
      assert.match(await signInAgain.text(), /<input[^>]+name="password"/);

      const fresh = await browser.post(
        `${lenientBase}/idp/account/passkeys`,
        { csrf, response: forLenient },
        { origin: lenientOrigin },
      );
      const accepted = await fresh.text();
      assert.equal(fresh.status, 200, alertOf(accepted) ?? '');
      assert.match(accepted, /data-testid="message">The passkey is registered\./);
    });

    test(`${SIGNIN_LIMITS.user.lockAfter} failed password sign-ins as the user name “second-factor:carol” lock that name, not carol’s authenticator app`, async () => {
      const signIn = new WebClient();
      const login = formAction(await (await startAt(signIn, '', strictBase)).text(), strictBase, 'login')!;
      const attempt = () => signIn.post(login, { username: 'second-factor:carol', password: 'guess' });
      for (let i = 1; i <= SIGNIN_LIMITS.user.lockAfter; i++)
        assert.equal((await attempt()).status, 401, `attempt ${i}`);
      assert.equal((await attempt()).status, 429);
      // Her codes are still checked: a wrong one is only wrong, with no Retry-After.
      const { browser, action } = await atTotpStep('carol', strictBase);
      const res = await browser.post(action, { code: '000000' });
      assert.equal(res.status, 401);
      assert.equal(res.headers.get('retry-after'), null);
      assert.equal(alertOf(await res.text()), 'Wrong code. Enter the 6 digits your authenticator app shows now.');
    });
  });
});

import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, test } from '@jest/globals';
import { decodeJwt } from 'jose';
import { DEMO_TOTP_SECRETS } from '../../src/auth/idp/demoTotp.js';
import { loginWithPkce } from '../../src/auth/pkceLogin.js';
import { rest, type RestResponse } from '../helpers/openapi.js';
import { answerTotp, follow } from '../helpers/secondFactor.js';
import { mfaLogin, startTestServer, type TestServer } from '../helpers/server.js';
import { startSwitchableIssuer, type SwitchableIssuer } from '../helpers/switchableIssuer.js';
import { send, type Transport } from '../helpers/transports.js';
import { location, signIn, WebClient } from '../helpers/webClient.js';

const MFA = 'urn:orders:acr:mfa';
const WEAKER = 'Staff changes need a sign-in with a second factor; sign in again with acr_values and max_age as given.';
const challenge = (description: string, maxAge = 900) =>
  `Bearer realm="orders-api", error="insufficient_user_authentication", error_description="${description}", acr_values="${MFA}", max_age=${maxAge}`;
const SET_STATUS = 'mutation($id: ID!, $status: String!) { updateOrderStatus(id: $id, status: $status) { id status } }';

interface Order {
  id: string;
  status: string;
  customer_id: string;
}

describe('staff changes need a recent second factor (RFC 9470 step-up)', () => {
  let server: TestServer;
  let alice: string;
  let carolPassword: string;
  let carolMfa: string;

  beforeAll(async () => {
    server = await startTestServer();
    [alice, carolPassword, carolMfa] = await Promise.all([
      server.token('alice'),
      server.token('carol', { mfa: false }),
      server.token('carol'),
    ]);
  });
  afterAll(() => server.close());

  const call = (method: string, path: string, opts: Parameters<typeof rest>[3] = {}, url = server.url) =>
    rest(url, method, path, opts);
  const place = async (token = alice) => {
    const res = await call('POST', '/orders', {
      token,
      body: { items: [{ sku: 'KB-001', qty: 1 }] },
      headers: { 'idempotency-key': randomUUID() },
    });
    assert.equal(res.status, 201, res.text);
    return { order: res.json<Order>(), etag: res.headers.get('etag')! };
  };
  const patch = (id: string, etag: string, token: string, status = 'paid', url = server.url) =>
    call(
      'PATCH',
      `/orders/${id}`,
      {
        token,
        body: { status },
        headers: { 'content-type': 'application/merge-patch+json', 'if-match': etag },
      },
      url,
    );
  const assertStepUpProblem = (res: RestResponse, instance: string, detail = WEAKER, maxAge = 900) => {
    assert.equal(res.status, 401, res.text);
    assert.equal(res.headers.get('www-authenticate'), challenge(detail, maxAge));
    assert.equal(res.headers.get('content-type'), 'application/problem+json; charset=utf-8');
    assert.deepEqual(res.json(), {
      type: '/problems/insufficient-user-authentication',
      title: 'Stronger sign-in required',
      status: 401,
      detail,
      instance,
      code: 'INSUFFICIENT_USER_AUTHENTICATION',
      acrValues: MFA,
      maxAge,
    });
  };

  test('tokens say how the user signed in: acr, amr (RFC 8176) and auth_time', () => {
    const password = decodeJwt(carolPassword);
    const mfa = decodeJwt(carolMfa);
    assert.equal(password.acr, 'urn:orders:acr:pwd');
    assert.deepEqual(password.amr, ['pwd']);
    assert.equal(mfa.acr, MFA);
    assert.deepEqual(mfa.amr, ['pwd', 'otp', 'mfa']);
    for (const claims of [password, mfa]) {
      assert.equal(typeof claims.auth_time, 'number');
      assert.ok(Math.abs((claims.auth_time as number) - Date.now() / 1000) < 120);
    }
    assert.equal(decodeJwt(alice).acr, 'urn:orders:acr:pwd');
  });

  test("carol with a password-only token: REST PATCH of alice's order is 401 insufficient_user_authentication, and nothing changes", async () => {
    const { order, etag } = await place();
    assertStepUpProblem(await patch(order.id, etag, carolPassword), `/v1/orders/${order.id}`);
    const after = await call('GET', `/orders/${order.id}`, { token: alice });
    assert.equal(after.json<Order>().status, 'pending');
    assert.equal(after.headers.get('etag'), etag);
  });

  test('every other staff change is refused the same way; reads work as before', async () => {
    const { order, etag } = await place();
    const path = `/orders/${order.id}`;
    assertStepUpProblem(
      await call('DELETE', path, { token: carolPassword, headers: { 'if-match': etag } }),
      `/v1${path}`,
    );
    assertStepUpProblem(
      await call('PUT', path, {
        token: carolPassword,
        body: { items: [{ sku: 'KB-001', qty: 2 }] },
        headers: { 'if-match': etag },
      }),
      `/v1${path}`,
    );
    assertStepUpProblem(
      await call('POST', '/orders', {
        token: carolPassword,
        body: { customer_id: order.customer_id, items: [{ sku: 'KB-001', qty: 1 }] },
        headers: { 'idempotency-key': randomUUID() },
      }),
      '/v1/orders',
    );
    const cancel = await server.gql(
      'mutation($id: ID!) { cancelOrder(id: $id) { status } }',
      { id: order.id },
      {
        token: carolPassword,
      },
    );
    assert.equal(cancel.body.errors?.[0]?.extensions?.code, 'INSUFFICIENT_USER_AUTHENTICATION');

    const read = await call('GET', path, { token: carolPassword });
    assert.equal(read.status, 200);
    assert.equal(read.json<Order>().status, 'pending');
    assert.equal((await call('GET', '/orders', { token: carolPassword })).status, 200);
    const list = await server.gql('{ recentOrders(first: 5) { id status } }', undefined, { token: carolPassword });
    assert.equal(list.status, 200);
    assert.equal(list.body.errors, undefined);
    assert.ok((list.body.data!.recentOrders as unknown[]).length > 0);
  });

  test('customers need no second factor for their own orders: alice cancels her pending order, carol her own', async () => {
    const mine = await place();
    const cancelled = await patch(mine.order.id, mine.etag, alice, 'cancelled');
    assert.equal(cancelled.status, 200, cancelled.text);
    assert.equal(cancelled.json<Order>().status, 'cancelled');

    const carols = await place(carolPassword);
    const own = await patch(carols.order.id, carols.etag, carolPassword, 'cancelled');
    assert.equal(own.status, 200, own.text);
    // Moving her own order on is the staff role's power, not a customer's: that needs the second factor.
    const next = await place(carolPassword);
    assertStepUpProblem(await patch(next.order.id, next.etag, carolPassword, 'paid'), `/v1/orders/${next.order.id}`);
  });

  test.each(['post', 'ws', 'sse'] as Transport[])(
    'GraphQL over %s: updateOrderStatus is refused with INSUFFICIENT_USER_AUTHENTICATION, acrValues and maxAge, then succeeds with --mfa',
    async (transport) => {
      const { order } = await place();
      const operation = { query: SET_STATUS, variables: { id: order.id, status: 'paid' } };
      const refused = await send(server.url, transport, operation, carolPassword);
      assert.deepEqual(refused.body.data, { updateOrderStatus: null });
      assert.deepEqual(refused.body.errors, [
        {
          message: WEAKER,
          locations: [{ line: 1, column: 40 }],
          path: ['updateOrderStatus'],
          extensions: { code: 'INSUFFICIENT_USER_AUTHENTICATION', acrValues: MFA, maxAge: 900 },
        },
      ]);
      const done = await send(server.url, transport, operation, carolMfa);
      assert.equal(done.body.errors, undefined);
      assert.deepEqual(done.body.data, { updateOrderStatus: { id: order.id, status: 'paid' } });
    },
  );

  test('with --mfa the same REST writes succeed', async () => {
    const { order, etag } = await place();
    const paid = await patch(order.id, etag, carolMfa);
    assert.equal(paid.status, 200, paid.text);
    assert.equal(paid.json<Order>().status, 'paid');
    const forAlice = await call('POST', '/orders', {
      token: carolMfa,
      body: { customer_id: order.customer_id, items: [{ sku: 'KB-001', qty: 1 }] },
      headers: { 'idempotency-key': randomUUID() },
    });
    assert.equal(forAlice.status, 201, forAlice.text);
    const removed = await call('DELETE', `/orders/${forAlice.json<Order>().id}`, { token: carolMfa });
    assert.equal(removed.status, 204);
  });

  test('16 concurrent password-only PATCHes are all refused; 16 with --mfa and one If-Match: one 200, fifteen 412', async () => {
    const { order, etag } = await place();
    const refused = await Promise.all(Array.from({ length: 16 }, () => patch(order.id, etag, carolPassword)));
    assert.deepEqual(
      refused.map((r) => r.status),
      Array(16).fill(401),
    );
    const raced = await Promise.all(Array.from({ length: 16 }, () => patch(order.id, etag, carolMfa)));
    assert.deepEqual(raced.map((r) => r.status).sort(), [200, ...Array(15).fill(412)]);
  });

  test('an auth_time past max_age is refused again; STEP_UP_ACR=off turns the rule off', async () => {
    const issuer = server.running.app.issuer;
    const short = await startTestServer({ OIDC_ISSUER: issuer, STEP_UP_MAX_AGE_S: '1' }, { sameDatabaseAs: server });
    const off = await startTestServer({ OIDC_ISSUER: issuer, STEP_UP_ACR: 'off' }, { sameDatabaseAs: server });
    try {
      const { order, etag } = await place();
      // Past the second after auth_time, whatever this machine's load: the token itself says when.
      const deadline = (decodeJwt(carolMfa).auth_time as number) * 1000 + 1000;
      await new Promise((resolve) => setTimeout(resolve, Math.max(0, deadline - Date.now()) + 50));
      const stale = await patch(order.id, etag, carolMfa, 'paid', short.url);
      assertStepUpProblem(
        stale,
        `/v1/orders/${order.id}`,
        'Staff changes need a sign-in within the last 1 seconds; sign in again with a second factor.',
        1,
      );
      // The same token is recent enough for the 900 seconds of the first replica.
      const paid = await patch(order.id, etag, carolMfa);
      assert.equal(paid.status, 200, paid.text);

      const next = await place();
      const relaxed = await patch(next.order.id, next.etag, carolPassword, 'paid', off.url);
      assert.equal(relaxed.status, 200, relaxed.text);
    } finally {
      await off.close();
      await short.close();
    }
  });

  test('a browser session carries its ID token level; /auth/login?acr_values=…&max_age=… asks only for the second factor, and the stepped-up session may change orders', async () => {
    const base = server.running.publicUrl;
    const browser = new WebClient();
    const { response } = await signIn(browser, base, 'carol');
    assert.equal(response.status, 303);
    const before = (await (await browser.get(`${base}/auth/session`)).json()) as Record<string, unknown>;
    assert.equal(before.acr, 'urn:orders:acr:pwd');
    assert.deepEqual(before.amr, ['pwd']);
    assert.equal(typeof before.authTime, 'string');

    const { order } = await place();
    const refused = await browser.graphql(
      base,
      `mutation { updateOrderStatus(id: "${order.id}", status: "paid") { status } }`,
    );
    assert.equal(refused.body.errors?.[0]?.extensions.code, 'INSUFFICIENT_USER_AUTHENTICATION');

    const home = await (await browser.get(`${base}/`, { accept: 'text/html' })).text();
    assert.match(
      home,
      /<dd data-testid="level">password <small>\(<code>urn:orders:acr:pwd<\/code> · <code>pwd<\/code>\)<\/small><\/dd>/,
    );
    const offer = /<a href="([^"]+)">Verify with a second factor<\/a>/.exec(home)?.[1]?.replace(/&amp;/g, '&');
    assert.equal(offer, '/auth/login?acr_values=urn%3Aorders%3Aacr%3Amfa&max_age=900');

    const start = await browser.get(`${base}${offer}`);
    assert.equal(start.status, 302);
    const authorize = location(start);
    assert.equal(authorize.searchParams.get('acr_values'), MFA);
    assert.equal(authorize.searchParams.get('max_age'), '900');
    const page = await follow(browser, await browser.get(authorize), '/auth/callback');
    assert.ok(page instanceof Response);
    const html = await page.clone().text();
    // The IdP session is a minute old, within max_age: the password is not asked again.
    assert.doesNotMatch(html, /name="password"/);
    assert.match(html, /asks for a second factor for <strong data-testid="account">Carol Clark<\/strong>/);
    const callback = await follow(browser, await answerTotp(browser, page, DEMO_TOTP_SECRETS.carol!), '/auth/callback');
    assert.ok(callback instanceof URL);
    assert.equal((await browser.get(callback)).status, 303);

    const after = (await (await browser.get(`${base}/auth/session`)).json()) as Record<string, unknown>;
    assert.equal(after.acr, MFA);
    assert.deepEqual(after.amr, ['pwd', 'otp', 'mfa']);
    const paid = await browser.graphql(
      base,
      `mutation { updateOrderStatus(id: "${order.id}", status: "paid") { status } }`,
    );
    assert.equal(paid.body.errors, undefined);
    assert.deepEqual(paid.body.data, { updateOrderStatus: { status: 'paid' } });
    const steppedUp = await (await browser.get(`${base}/`, { accept: 'text/html' })).text();
    assert.match(steppedUp, /data-testid="level">second factor/);
    assert.doesNotMatch(steppedUp, /Verify with a second factor/);
  });

  test('asking for the MFA level for an account without a second factor signs in at the password level, without a loop or a page', async () => {
    const base = server.running.publicUrl;
    const browser = new WebClient();
    assert.equal((await signIn(browser, base, 'alice')).response.status, 303);
    const start = await browser.get(`${base}/auth/login?acr_values=${MFA}`);
    // The IdP's session is reused: straight back to the callback, with what alice has.
    const callback = await follow(browser, await browser.get(location(start)), '/auth/callback');
    assert.ok(callback instanceof URL, 'no page was shown');
    assert.equal((await browser.get(callback)).status, 303);
    const session = (await (await browser.get(`${base}/auth/session`)).json()) as Record<string, unknown>;
    assert.equal(session.acr, 'urn:orders:acr:pwd');
    assert.deepEqual(session.amr, ['pwd']);
  });

  test('/auth/login refuses malformed acr_values and max_age with a clear page', async () => {
    const base = server.running.publicUrl;
    for (const query of ['acr_values=%22quoted%22', 'max_age=-1', 'max_age=86401', `acr_values=${'a '.repeat(11)}`]) {
      const res = await new WebClient().get(`${base}/auth/login?${query}`);
      assert.equal(res.status, 400, query);
      assert.match(await res.text(), /acr_values must be up to 10 space-separated values and max_age whole seconds/);
    }
  });
});

describe('an external issuer’s acr and amr are honoured the same way', () => {
  let issuer: SwitchableIssuer;
  let app: TestServer;
  const warnings: { event?: unknown; msg: string }[] = [];

  beforeAll(async () => {
    issuer = await startSwitchableIssuer();
    app = await startTestServer(
      { OIDC_ISSUER: issuer.url, OIDC_CLIENT_ID: 'orders-web', OIDC_CLIENT_SECRET: 'orders-web-secret' },
      { onLog: (entry) => warnings.push(entry) },
    );
    await app.running.app.acrSupportChecked;
  });
  afterAll(async () => {
    await app?.close();
    await issuer?.close();
  });

  const token = async (user: string, mfa: boolean) =>
    (await loginWithPkce({ issuer: issuer.url, username: user, password: user, ...mfaLogin(user, mfa) })).accessToken;

  test("carol's password-only token from the external issuer is refused a staff change; her MFA token is not", async () => {
    const alice = await token('alice', false);
    const created = await rest(app.url, 'POST', '/orders', {
      token: alice,
      body: { items: [{ sku: 'KB-001', qty: 1 }] },
      headers: { 'idempotency-key': randomUUID() },
    });
    assert.equal(created.status, 201, created.text);
    const { id } = created.json<Order>();
    const etag = created.headers.get('etag')!;
    const patchWith = (t: string) =>
      rest(app.url, 'PATCH', `/orders/${id}`, {
        token: t,
        body: { status: 'paid' },
        headers: { 'content-type': 'application/merge-patch+json', 'if-match': etag },
      });
    const refused = await patchWith(await token('carol', false));
    assert.equal(refused.status, 401);
    assert.equal(refused.headers.get('www-authenticate'), challenge(WEAKER));
    const paid = await patchWith(await token('carol', true));
    assert.equal(paid.status, 200, paid.text);
  });

  test('at start, the issuer’s metadata was read: it lists the MFA level, so nothing is logged', () => {
    assert.deepEqual(
      warnings.filter((w) => String(w.event).startsWith('auth.step_up')),
      [],
    );
  });

  test('an issuer that does not list the required acr is named in a warning at start', async () => {
    const seen: { event?: unknown; msg: string; required?: unknown }[] = [];
    const strict = await startTestServer(
      { OIDC_ISSUER: issuer.url, STEP_UP_ACR: 'urn:example:acr:gold' },
      { onLog: (entry) => seen.push(entry) },
    );
    try {
      await strict.running.app.acrSupportChecked;
      const [warning] = seen.filter((w) => w.event === 'auth.step_up_unsupported');
      assert.ok(warning, JSON.stringify(seen));
      assert.deepEqual(warning.required, ['urn:example:acr:gold']);
      assert.match(warning.msg, /does not list urn:example:acr:gold in acr_values_supported/);
    } finally {
      await strict.close();
    }
  });
});

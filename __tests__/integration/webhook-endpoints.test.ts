import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, test } from '@jest/globals';
import { loginWithPkce } from '../../src/auth/pkceLogin.js';
import type { HostLookup } from '../../src/webhooks/index.js';
import type { Problem } from '../helpers/http.js';
import { eventually } from '../helpers/load.js';
import { rest, type RestOptions } from '../helpers/openapi.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { idpSignedToken } from '../helpers/tokens.js';
import { startWebhookReceiver, type WebhookReceiver } from '../helpers/webhookReceiver.js';

interface Endpoint {
  id: string;
  url: string;
  events: string[];
  description: string | null;
  enabled: boolean;
  disabled_reason: string | null;
  secret?: string;
  created_at: string;
  updated_at: string;
}

const MFA = 'urn:orders:acr:mfa';
const WEAKER = 'Staff changes need a sign-in with a second factor; sign in again with acr_values and max_age as given.';

/**
 * Names the tests resolve, and nothing else: whatever the code does, no lookup reaches a real DNS server. The
 * documentation range 203.0.113.0/24 stands for a public receiver; `rebind.test` answers a public address until
 * the test turns it to loopback (DNS rebinding).
 */
const NAMES: Record<string, string> = {
  'public.test': '203.0.113.10',
  'hooks.test': '10.0.0.1',
  'metadata.test': '169.254.169.254',
  'mixed.test': '203.0.113.11',
};
let rebindTo = '203.0.113.12';
let downTo = '203.0.113.13';
const lookup: HostLookup = async (hostname) => {
  if (hostname === 'rebind.test') return [{ address: rebindTo, family: 4 }];
  if (hostname === 'down.test') return [{ address: downTo, family: 4 }];
  if (hostname === 'mixed.test')
    return [
      { address: NAMES[hostname]!, family: 4 },
      { address: '192.168.1.20', family: 4 },
    ];
  const address = NAMES[hostname];
  if (!address) throw Object.assign(new Error(`test lookup: ${hostname} is not a test name`), { code: 'ENOTFOUND' });
  return [{ address, family: 4 }];
};

/**
 * Webhook endpoints as resources, on REST (every answer checked against the OpenAPI document) and GraphQL, with the
 * default SSRF rules (private targets refused). The server opens no socket for webhooks at all here: its connection
 * opener counts and refuses, so nothing can leave the machine whatever the code under test does.
 */
describe('webhook endpoints: REST and GraphQL, ownership, limits, step-up and SSRF refusals', () => {
  let server: TestServer;
  let alice: string;
  let bob: string;
  let carol: string;
  let carolPassword: string;
  let receiver: WebhookReceiver;
  let sockets = 0;

  const call = (method: string, path: string, opts: RestOptions = {}) => rest(server.url, method, path, opts);
  const problem = async (pending: ReturnType<typeof call>, status: number, code: string) => {
    const res = await pending;
    assert.equal(res.status, status, res.text);
    if (res.text === '') return { body: { status, code } as Problem, headers: res.headers };
    const body = res.json<Problem>();
    assert.equal(body.code, code, res.text);
    return { body, headers: res.headers };
  };
  const create = (token: string, body: unknown) => call('POST', '/webhook-endpoints', { token, body });
  const pointers = (p: { body: Problem }) => (p.body.errors ?? []).map((e) => e.pointer).sort();

  beforeAll(async () => {
    receiver = await startWebhookReceiver();
    server = await startTestServer(
      // An endpoint failing for a second is disabled here (5 days by default): one test waits for that.
      { WEBHOOK_POLL_MS: '100', WEBHOOK_DISABLE_AFTER_S: '1' },
      {
        webhookNetwork: {
          lookup,
          createConnection: () => {
            sockets++;
            throw new Error('test: this server may open no socket for webhooks');
          },
        },
      },
    );
    ({ alice, bob, carol } = await server.users());
    carolPassword = await server.token('carol', { mfa: false });
  });
  afterAll(async () => {
    await server?.close();
    await receiver?.close();
  });

  test('create (201, Location, ETag, the secret once), read, list in pages, patch under If-Match, rotate, delete', async () => {
    const created = await create(alice, {
      url: 'https://public.test/hooks',
      events: ['order.created', 'order.cancelled'],
      description: 'fulfilment',
    });
    assert.equal(created.status, 201, created.text);
    const endpoint = created.json<Endpoint>();
    assert.match(endpoint.id, /^we_[0-9a-z]{26}$/);
    assert.match(endpoint.secret!, /^whsec_[A-Za-z0-9+/]{43}=$/);
    assert.equal(created.headers.get('location'), `/v1/webhook-endpoints/${endpoint.id}`);
    assert.equal(created.headers.get('etag'), `"${endpoint.id}.v1"`);
    assert.equal(created.headers.get('cache-control'), 'no-store');
    assert.deepEqual(
      { ...endpoint, secret: undefined, created_at: undefined, updated_at: undefined },
      {
        id: endpoint.id,
        url: 'https://public.test/hooks',
        events: ['order.created', 'order.cancelled'],
        description: 'fulfilment',
        enabled: true,
        disabled_reason: null,
        secret: undefined,
        created_at: undefined,
        updated_at: undefined,
      },
    );

    const got = await call('GET', `/webhook-endpoints/${endpoint.id}`, { token: alice });
    assert.equal(got.status, 200);
    assert.equal(got.json<Endpoint>().secret, undefined, 'the secret is never read back');
    assert.equal(got.headers.get('etag'), `"${endpoint.id}.v1"`);
    const head = await call('HEAD', `/webhook-endpoints/${endpoint.id}`, { token: alice });
    assert.equal(head.status, 200);

    const second = await create(alice, { url: 'https://public.test/second', events: ['order.created'] });
    assert.equal(second.status, 201);
    const first = await call('GET', '/webhook-endpoints?limit=1', { token: alice });
    assert.equal(first.status, 200);
    const page = first.json<{ webhook_endpoints: Endpoint[]; next_cursor: string | null }>();
    assert.deepEqual(
      page.webhook_endpoints.map((e) => e.id),
      [second.json<Endpoint>().id],
    );
    assert.equal(first.headers.get('link'), `</v1/webhook-endpoints?limit=1&cursor=${page.next_cursor}>; rel="next"`);
    const rest2 = await call('GET', `/webhook-endpoints?limit=100&cursor=${page.next_cursor}`, { token: alice });
    assert.ok(rest2.json<{ webhook_endpoints: Endpoint[] }>().webhook_endpoints.some((e) => e.id === endpoint.id));
    await problem(call('GET', '/webhook-endpoints?limit=0', { token: alice }), 400, 'MALFORMED_REQUEST');
    await problem(call('GET', '/webhook-endpoints?cursor=nope', { token: alice }), 400, 'MALFORMED_REQUEST');

    const path = `/webhook-endpoints/${endpoint.id}`;
    await problem(call('PATCH', path, { token: alice, body: { enabled: false } }), 428, 'PRECONDITION_REQUIRED');
    await problem(
      call('PATCH', path, { token: alice, body: { enabled: false }, headers: { 'if-match': `"${endpoint.id}.v9"` } }),
      412,
      'PRECONDITION_FAILED',
    );
    await problem(
      call('PATCH', path, { token: alice, body: { enabled: false }, headers: { 'if-match': 'x' } }),
      400,
      'MALFORMED_REQUEST',
    );
    const wrongType = await problem(
      call('PATCH', path, {
        token: alice,
        raw: '{}',
        headers: { 'if-match': `"${endpoint.id}.v1"`, 'content-type': 'text/plain' },
      }),
      415,
      'UNSUPPORTED_MEDIA_TYPE',
    );
    assert.equal(wrongType.headers.get('accept-patch'), 'application/merge-patch+json, application/json');
    const patched = await call('PATCH', path, {
      token: alice,
      body: { enabled: false, description: null, events: ['order.status_changed'] },
      headers: { 'if-match': `"${endpoint.id}.v1"` },
    });
    assert.equal(patched.status, 200, patched.text);
    assert.deepEqual(
      (({ enabled, description, events }) => ({ enabled, description, events }))(patched.json<Endpoint>()),
      { enabled: false, description: null, events: ['order.status_changed'] },
    );
    assert.equal(patched.headers.get('etag'), `"${endpoint.id}.v2"`);

    const rotated = await call('POST', `${path}/rotate-secret`, { token: alice });
    assert.equal(rotated.status, 200, rotated.text);
    assert.notEqual(rotated.json<Endpoint>().secret, endpoint.secret);
    assert.equal(rotated.headers.get('etag'), `"${endpoint.id}.v3"`);
    await problem(
      call('POST', `${path}/rotate-secret`, { token: alice, headers: { 'if-match': `"${endpoint.id}.v1"` } }),
      412,
      'PRECONDITION_FAILED',
    );

    const log = await call('GET', `${path}/deliveries`, { token: alice });
    assert.equal(log.status, 200);
    assert.deepEqual(log.json(), { deliveries: [], next_cursor: null });

    await problem(
      call('DELETE', path, { token: alice, headers: { 'if-match': `"${endpoint.id}.v1"` } }),
      412,
      'PRECONDITION_FAILED',
    );
    const deleted = await call('DELETE', path, { token: alice });
    assert.equal(deleted.status, 204);
    await problem(call('GET', path, { token: alice }), 404, 'NOT_FOUND');
    await problem(call('DELETE', path, { token: alice }), 404, 'NOT_FOUND');
  });

  test("someone else's endpoint is 404 on every operation, and absent from their list", async () => {
    const created = await create(alice, { url: 'https://public.test/private', events: ['order.created'] });
    const { id } = created.json<Endpoint>();
    const path = `/webhook-endpoints/${id}`;
    const tag = { 'if-match': created.headers.get('etag')! };
    await problem(call('GET', path, { token: bob }), 404, 'NOT_FOUND');
    await problem(call('PATCH', path, { token: bob, body: { enabled: false }, headers: tag }), 404, 'NOT_FOUND');
    await problem(call('DELETE', path, { token: bob }), 404, 'NOT_FOUND');
    await problem(call('POST', `${path}/rotate-secret`, { token: bob }), 404, 'NOT_FOUND');
    await problem(call('GET', `${path}/deliveries`, { token: bob }), 404, 'NOT_FOUND');
    await problem(call('POST', `${path}/ping`, { token: bob }), 404, 'NOT_FOUND');
    const bobs = await call('GET', '/webhook-endpoints', { token: bob });
    assert.ok(!bobs.json<{ webhook_endpoints: Endpoint[] }>().webhook_endpoints.some((e) => e.id === id));
    await problem(call('GET', '/webhook-endpoints/not-an-id', { token: alice }), 404, 'NOT_FOUND');
    await problem(call('GET', path, { token: alice, headers: { accept: 'text/html' } }), 406, 'NOT_ACCEPTABLE');
    await problem(call('GET', path, {}), 401, 'UNAUTHENTICATED');
    const noScope = (
      await loginWithPkce({ issuer: server.running.app.issuer, username: 'alice', password: 'alice', scope: 'openid' })
    ).accessToken;
    await problem(
      create(noScope, { url: 'https://public.test/x', events: ['order.created'] }),
      403,
      'INSUFFICIENT_SCOPE',
    );
  });

  test("staff list, read and disable anyone's endpoint (REST and GraphQL), and may change nothing else of it", async () => {
    const created = await create(alice, { url: 'https://public.test/watched', events: ['order.created'] });
    assert.equal(created.status, 201, created.text);
    const { id } = created.json<Endpoint>();
    const path = `/webhook-endpoints/${id}`;
    const listed = await call('GET', '/webhook-endpoints?limit=100', { token: carol });
    assert.equal(listed.status, 200, listed.text);
    assert.deepEqual(
      listed
        .json<{ webhook_endpoints: Endpoint[] }>()
        .webhook_endpoints.filter((e) => e.id === id)
        .map((e) => e.url),
      ['https://public.test/watched'],
    );
    const read = await call('GET', path, { token: carol });
    assert.equal(read.status, 200, read.text);
    assert.equal(read.headers.get('etag'), `"${id}.v1"`);
    assert.equal((await call('GET', `${path}/deliveries`, { token: carol })).status, 200);
    // Only enabling and disabling: the rest is the owner's (403, as the endpoint is visible to staff).
    for (const [method, sub, opts] of [
      ['PATCH', '', { body: { url: 'https://public.test/elsewhere' }, headers: { 'if-match': `"${id}.v1"` } }],
      ['PATCH', '', { body: { enabled: false, description: 'x' }, headers: { 'if-match': `"${id}.v1"` } }],
      ['DELETE', '', {}],
      ['POST', '/rotate-secret', {}],
      ['POST', '/ping', {}],
    ] as const) {
      const refused = await problem(call(method, `${path}${sub}`, { token: carol, ...opts }), 403, 'FORBIDDEN');
      assert.equal(refused.body.detail, "Staff may disable or enable someone else's webhook endpoint, nothing more.");
    }
    // A staff write like any other: a second factor first.
    await problem(
      call('PATCH', path, { token: carolPassword, body: { enabled: false }, headers: { 'if-match': `"${id}.v1"` } }),
      401,
      'INSUFFICIENT_USER_AUTHENTICATION',
    );
    const disabled = await call('PATCH', path, {
      token: carol,
      body: { enabled: false },
      headers: { 'if-match': `"${id}.v1"` },
    });
    assert.equal(disabled.status, 200, disabled.text);
    assert.deepEqual([disabled.json<Endpoint>().enabled, disabled.headers.get('etag')], [false, `"${id}.v2"`]);
    assert.equal((await call('GET', path, { token: alice })).json<Endpoint>().enabled, false);
    // The GraphQL mirror: staff read and enable it again; a customer who does not own it sees null.
    const byStaff = await server.gql(
      'query($id: ID!) { webhookEndpoint(id: $id) { id enabled } webhookEndpoints(first: 100) { id } }',
      { id },
      { token: carol },
    );
    assert.deepEqual(byStaff.body.data!.webhookEndpoint, { id, enabled: false });
    assert.ok((byStaff.body.data!.webhookEndpoints as { id: string }[]).some((e) => e.id === id));
    const enabled = await server.gql(
      'mutation($id: ID!, $etag: String) { updateWebhookEndpoint(id: $id, etag: $etag, input: { enabled: true }) { enabled etag } }',
      { id, etag: `"${id}.v2"` },
      { token: carol },
    );
    assert.deepEqual(enabled.body.data!.updateWebhookEndpoint, { enabled: true, etag: `"${id}.v3"` });
    const byBob = await server.gql('query($id: ID!) { webhookEndpoint(id: $id) { id } }', { id }, { token: bob });
    assert.equal(byBob.body.data!.webhookEndpoint, null);
    await problem(
      call('PATCH', path, { token: bob, body: { enabled: false }, headers: { 'if-match': `"${id}.v3"` } }),
      404,
      'NOT_FOUND',
    );
  });

  test('bad input is 422 with a JSON pointer per invalid field', async () => {
    const invalid = await problem(
      create(alice, {
        url: 'ftp://public.test/x',
        events: ['order.created', 'order.shipped'],
        description: 'x'.repeat(501),
      }),
      422,
      'BAD_USER_INPUT',
    );
    assert.deepEqual(pointers(invalid), ['/description', '/events/1', '/url']);
    const notStrings = await problem(create(alice, { url: 42, events: ['order.created', 7] }), 422, 'BAD_USER_INPUT');
    assert.deepEqual(pointers(notStrings), ['/events/1', '/url']);
    for (const [url, reason] of [
      ['not a url', /absolute http or https URL/],
      ['ftp://public.test/x', /http or https/],
      ['https://user:secret@public.test/x', /user name or password/],
      ['https://public.test/x#frag', /fragment/],
      ['https://nowhere.test/x', /does not resolve/],
      [`https://public.test/${'a'.repeat(2100)}`, /at most 2048/],
    ] as const) {
      const refused = await problem(create(alice, { url, events: ['order.created'] }), 422, 'BAD_USER_INPUT');
      assert.deepEqual(pointers(refused), ['/url']);
      assert.match(refused.body.errors![0]!.reason, reason);
    }
    for (const events of [[], 'order.created', null]) {
      const refused = await problem(create(alice, { url: 'https://public.test/x', events }), 422, 'BAD_USER_INPUT');
      assert.deepEqual(pointers(refused), ['/events']);
    }
    const extra = await problem(
      create(alice, { url: 'https://public.test/x', events: ['order.created'], secret: 'whsec_x', id: 'we_x' }),
      422,
      'BAD_USER_INPUT',
    );
    assert.deepEqual(pointers(extra), ['/id', '/secret']);
    await problem(call('POST', '/webhook-endpoints', { token: alice, raw: '{"url":' }), 400, 'MALFORMED_REQUEST');
    const text = await problem(
      call('POST', '/webhook-endpoints', { token: alice, raw: '{}', headers: { 'content-type': 'text/plain' } }),
      415,
      'UNSUPPORTED_MEDIA_TYPE',
    );
    assert.equal(text.headers.get('accept-post'), 'application/json');
    await problem(
      call('POST', '/webhook-endpoints', { token: alice, raw: JSON.stringify({ pad: 'x'.repeat(70_000) }) }),
      413,
      'PAYLOAD_TOO_LARGE',
    );
  });

  test('loopback, private, link-local, metadata and unique-local targets are refused (422) without opening a socket', async () => {
    for (const url of [
      `http://127.0.0.1:${receiver.port}/hook`,
      'http://169.254.169.254/latest/meta-data/',
      'http://[::1]/hook',
      'http://hooks.test/hook',
      'http://metadata.test/hook',
      'http://[fd00:ec2::254]/',
      'http://[::ffff:10.0.0.1]/',
      'http://100.64.0.1/',
      'http://mixed.test/hook',
    ]) {
      const refused = await problem(create(alice, { url, events: ['order.created'] }), 422, 'BAD_USER_INPUT');
      assert.deepEqual(pointers(refused), ['/url'], url);
      assert.match(refused.body.errors![0]!.reason, /address, which webhooks may not call$/, url);
    }
    // The unspecified address (and 0.0.0.0) reaches this host on most systems.
    const unspecified = await problem(
      create(alice, { url: 'http://[::]/', events: ['order.created'] }),
      422,
      'BAD_USER_INPUT',
    );
    assert.equal(
      unspecified.body.errors![0]!.reason,
      'resolves to ::, an unspecified address, which webhooks may not call',
    );
    assert.equal(sockets, 0);
    assert.equal(receiver.connections(), 0);
  });

  test('IPv6 forms that embed a loopback IPv4 address (compatible, SIIT, mapped, NAT64, 6to4, Teredo) are refused', async () => {
    for (const [host, address, form] of [
      ['::7f00:1', '::7f00:1', 'IPv4-compatible'],
      ['::ffff:0:7f00:1', '::ffff:0:7f00:1', 'IPv4-translated (SIIT)'],
      ['::ffff:127.0.0.1', '::ffff:7f00:1', 'IPv4-mapped'],
      ['64:ff9b::127.0.0.1', '64:ff9b::7f00:1', 'NAT64'],
      ['2002:7f00:1::', '2002:7f00:1::', '6to4'],
      ['2001:0:7f00:1::', '2001:0:7f00:1::', 'Teredo'],
    ] as const) {
      const res = await create(alice, { url: `http://[${host}]:${receiver.port}/hook`, events: ['order.created'] });
      assert.equal(res.status, 422, res.text);
      assert.equal(res.headers.get('content-type'), 'application/problem+json; charset=utf-8');
      const reason = `resolves to ${address}, the ${form} form of 127.0.0.1, a loopback address, which webhooks may not call`;
      assert.deepEqual(res.json(), {
        type: '/problems/invalid-input',
        title: 'Invalid input',
        status: 422,
        detail: `/url: ${reason}`,
        instance: '/v1/webhook-endpoints',
        code: 'BAD_USER_INPUT',
        errors: [{ pointer: '/url', reason }],
      });
    }
    const publicOne = await create(alice, { url: 'http://[64:ff9b::203.0.113.10]/hook', events: ['order.created'] });
    assert.equal(publicOne.status, 201, publicOne.text);
    assert.equal(sockets, 0);
    assert.equal(receiver.connections(), 0);
  });

  test('a name that resolves to loopback at send time (DNS rebinding) is refused before any socket is opened', async () => {
    rebindTo = '203.0.113.12';
    const created = await create(alice, { url: `http://rebind.test:${receiver.port}/hook`, events: ['order.created'] });
    assert.equal(created.status, 201, created.text);
    const { id } = created.json<Endpoint>();
    rebindTo = '127.0.0.1';
    const pinged = await call('POST', `/webhook-endpoints/${id}/ping`, { token: alice });
    assert.equal(pinged.status, 202);
    const deliveryId = pinged.json<{ id: string }>().id;
    const failed = await eventually('the refused attempt in the log', async () => {
      const log = await call('GET', `/webhook-endpoints/${id}/deliveries`, { token: alice });
      const found = log
        .json<{
          deliveries: { id: string; status: string; attempts: { error: string; status_code: number | null }[] }[];
        }>()
        .deliveries.find((d) => d.id === deliveryId);
      return found?.status === 'failed' ? found : undefined;
    });
    assert.equal(failed.attempts.length, 1);
    assert.equal(failed.attempts[0]!.status_code, null);
    assert.match(failed.attempts[0]!.error, /^resolves to 127\.0\.0\.1, a loopback address/);
    assert.equal(sockets, 0, 'no socket was created');
    assert.equal(receiver.connections(), 0);
    assert.ok((await server.counter('webhook_deliveries_total{result="refused_address"}')) >= 1);
  });

  test('an endpoint failing continuously for WEBHOOK_DISABLE_AFTER_S is disabled, visibly, and PATCH resumes it', async () => {
    downTo = '203.0.113.13';
    const created = await create(bob, { url: 'http://down.test/hook', events: ['order.created'] });
    assert.equal(created.status, 201, created.text);
    const { id } = created.json<Endpoint>();
    // From now on every attempt is refused at send time: a failure, as a receiver that is down would be.
    downTo = '127.0.0.1';
    type Log = { deliveries: { id: string; status: string; attempts: unknown[] }[] };
    const attemptsOf = async (deliveryId: string) =>
      (await call('GET', `/webhook-endpoints/${id}/deliveries`, { token: bob }))
        .json<Log>()
        .deliveries.find((d) => d.id === deliveryId);
    const pinged = await call('POST', `/webhook-endpoints/${id}/ping`, { token: bob });
    const deliveryId = pinged.json<{ id: string }>().id;
    // Each failure is in the log before the next retry, until the failing has lasted WEBHOOK_DISABLE_AFTER_S.
    const disabled = await eventually(
      'the endpoint disabled',
      async () => {
        const made = await eventually('the attempt recorded', async () => {
          const d = await attemptsOf(deliveryId);
          return d?.status === 'failed' ? d.attempts.length : undefined;
        });
        const current = await call('GET', `/webhook-endpoints/${id}`, { token: bob });
        const state = current.json<Endpoint>();
        if (!state.enabled) return { ...state, etag: current.headers.get('etag')!, attempts: made };
        const retried = await call('POST', `/webhook-endpoints/${id}/deliveries/${deliveryId}/retry`, { token: bob });
        assert.equal(retried.status, 202, retried.text);
        await eventually(
          'the retry recorded',
          async () => (await attemptsOf(deliveryId))!.attempts.length > made || undefined,
        );
        return undefined;
      },
      { tries: 200, everyMs: 50 },
    );
    assert.match(disabled.disabled_reason!, /^failing continuously since \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
    assert.ok(disabled.attempts >= 2, 'a first failure starts the streak; a later one ends it');
    assert.equal(sockets, 0);
    downTo = '203.0.113.13';
    const resumed = await call('PATCH', `/webhook-endpoints/${id}`, {
      token: bob,
      body: { enabled: true },
      headers: { 'if-match': disabled.etag },
    });
    assert.equal(resumed.status, 200, resumed.text);
    const state = resumed.json<Endpoint>();
    assert.deepEqual([state.enabled, state.disabled_reason], [true, null]);
  });

  test('20 endpoints per owner: the 20th is created, the 21st refused, also under 30 concurrent creates', async () => {
    const body = { url: 'https://public.test/limit', events: ['order.created'] };
    const owner = await idpSignedToken(server, { sub: `limit-${randomUUID()}`, expiresIn: 600 });
    for (let i = 0; i < 19; i++) assert.equal((await create(owner, body)).status, 201);
    assert.equal((await create(owner, body)).status, 201, 'the 20th');
    const over = await problem(create(owner, body), 422, 'BAD_USER_INPUT');
    assert.deepEqual(over.body.errors, [
      { pointer: '', reason: 'at most 20 webhook endpoints per owner; delete one first' },
    ]);

    const racing = await idpSignedToken(server, { sub: `race-${randomUUID()}`, expiresIn: 600 });
    const answers = await Promise.all(Array.from({ length: 30 }, () => create(racing, body)));
    const statuses = answers.map((a) => a.status).sort();
    assert.deepEqual(statuses, [...Array(20).fill(201), ...Array(10).fill(422)]);
    const listed = await call('GET', '/webhook-endpoints?limit=100', { token: racing });
    assert.equal(listed.json<{ webhook_endpoints: unknown[] }>().webhook_endpoints.length, 20);
  });

  test('staff need a recent second factor to manage endpoints (REST and GraphQL); customers do not', async () => {
    const body = { url: 'https://public.test/staff', events: ['order.created'] };
    const refused = await call('POST', '/webhook-endpoints', { token: carolPassword, body });
    assert.equal(refused.status, 401, refused.text);
    assert.equal(
      refused.headers.get('www-authenticate'),
      `Bearer realm="orders-api", error="insufficient_user_authentication", error_description="${WEAKER}", acr_values="${MFA}", max_age=900`,
    );
    assert.equal(refused.json<Problem>().code, 'INSUFFICIENT_USER_AUTHENTICATION');
    const created = await create(carol, body);
    assert.equal(created.status, 201, created.text);
    const { id } = created.json<Endpoint>();
    const tag = { 'if-match': created.headers.get('etag')! };
    for (const [method, path, opts] of [
      ['PATCH', `/webhook-endpoints/${id}`, { body: { enabled: false }, headers: tag }],
      ['DELETE', `/webhook-endpoints/${id}`, {}],
      ['POST', `/webhook-endpoints/${id}/rotate-secret`, {}],
      ['POST', `/webhook-endpoints/${id}/ping`, {}],
    ] as const) {
      await problem(call(method, path, { token: carolPassword, ...opts }), 401, 'INSUFFICIENT_USER_AUTHENTICATION');
    }
    // Reading needs no second factor.
    assert.equal((await call('GET', `/webhook-endpoints/${id}`, { token: carolPassword })).status, 200);
    const viaGraphql = await server.gql(
      'mutation($url: String!) { createWebhookEndpoint(input: { url: $url, events: ["order.created"] }) { secret } }',
      { url: 'https://public.test/staff-gql' },
      { token: carolPassword },
    );
    assert.equal(viaGraphql.body.errors?.[0]?.extensions?.code, 'INSUFFICIENT_USER_AUTHENTICATION');
    assert.equal(viaGraphql.body.errors?.[0]?.extensions?.acrValues, MFA);
    // alice, a customer without a second factor, manages her own.
    assert.equal((await create(alice, body)).status, 201);
  });

  test('GraphQL: create (with the secret), list, read, update under an etag, rotate and delete; others see null', async () => {
    const CREATE = `mutation($input: CreateWebhookEndpointInput!) {
      createWebhookEndpoint(input: $input) { secret endpoint { id url events description enabled disabledReason etag createdAt } }
    }`;
    const created = await server.gql(
      CREATE,
      {
        input: {
          url: 'https://public.test/gql',
          events: ['order.created', 'order.status_changed'],
          description: 'erp',
        },
      },
      { token: bob },
    );
    assert.equal(created.status, 200, JSON.stringify(created.body));
    const made = created.body.data!.createWebhookEndpoint as {
      secret: string;
      endpoint: { id: string; etag: string; events: string[]; enabled: boolean; disabledReason: string | null };
    };
    assert.match(made.secret, /^whsec_/);
    assert.deepEqual(made.endpoint.events, ['order.created', 'order.status_changed']);
    assert.equal(made.endpoint.etag, `"${made.endpoint.id}.v1"`);
    const rest = await call('GET', `/webhook-endpoints/${made.endpoint.id}`, { token: bob });
    assert.equal(rest.status, 200, 'one use case, one store: REST reads what GraphQL made');

    const listed = await server.gql('{ webhookEndpoints(first: 100) { id url } }', undefined, { token: bob });
    assert.ok((listed.body.data!.webhookEndpoints as { id: string }[]).some((e) => e.id === made.endpoint.id));
    const byAlice = await server.gql(
      'query($id: ID!) { webhookEndpoint(id: $id) { id } }',
      { id: made.endpoint.id },
      { token: alice },
    );
    assert.equal(byAlice.body.data!.webhookEndpoint, null);

    const bad = await server.gql(
      CREATE,
      { input: { url: 'http://10.0.0.9/', events: ['order.lost'] } },
      { token: bob },
    );
    assert.equal(bad.body.errors?.[0]?.extensions?.code, 'BAD_USER_INPUT');
    assert.deepEqual(
      (bad.body.errors?.[0]?.extensions?.invalid as { pointer: string }[]).map((i) => i.pointer).sort(),
      ['/events/0', '/url'],
    );

    const UPDATE = `mutation($id: ID!, $etag: String, $input: UpdateWebhookEndpointInput!) {
      updateWebhookEndpoint(id: $id, etag: $etag, input: $input) { enabled description etag }
    }`;
    const stale = await server.gql(
      UPDATE,
      { id: made.endpoint.id, etag: '"we_x.v9"', input: { enabled: false } },
      { token: bob },
    );
    assert.equal(stale.body.errors?.[0]?.extensions?.code, 'PRECONDITION_FAILED');
    const updated = await server.gql(
      UPDATE,
      { id: made.endpoint.id, etag: made.endpoint.etag, input: { enabled: false, description: null } },
      { token: bob },
    );
    assert.deepEqual(updated.body.data!.updateWebhookEndpoint, {
      enabled: false,
      description: null,
      etag: `"${made.endpoint.id}.v2"`,
    });
    const rotated = await server.gql(
      'mutation($id: ID!) { rotateWebhookEndpointSecret(id: $id) { secret endpoint { etag } } }',
      { id: made.endpoint.id },
      { token: bob },
    );
    const secret = (rotated.body.data!.rotateWebhookEndpointSecret as { secret: string }).secret;
    assert.match(secret, /^whsec_/);
    assert.notEqual(secret, made.secret);
    const notHers = await server.gql(
      'mutation($id: ID!) { deleteWebhookEndpoint(id: $id) }',
      { id: made.endpoint.id },
      { token: alice },
    );
    assert.equal(notHers.body.errors?.[0]?.extensions?.code, 'NOT_FOUND');
    const deleted = await server.gql(
      'mutation($id: ID!) { deleteWebhookEndpoint(id: $id) }',
      { id: made.endpoint.id },
      { token: bob },
    );
    assert.equal(deleted.body.data!.deleteWebhookEndpoint, true);
    assert.equal((await call('GET', `/webhook-endpoints/${made.endpoint.id}`, { token: bob })).status, 404);
  });
});

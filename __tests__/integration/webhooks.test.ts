// Webhook endpoints and their delivery, in one Jest file: a file loads its modules into a fresh context and costs about
// 1.5 s of CPU before its first test (docs/testing.md#how-long-it-takes). Each top-level describe block below was a
// test file of its own, named after it (the comment above it gives the old file name), with its tests unchanged,
// starting the servers it starts; none shares a server with another block.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, test } from '@jest/globals';
import { type OrderWebhook, webhookReceiver } from '../../examples/webhook-receiver.js';
import { loginWithPkce } from '../../src/auth/pkceLogin.js';
import type { HostLookup } from '../../src/webhooks/index.js';
import type { Problem } from '../helpers/http.js';
import { eventually } from '../helpers/load.js';
import { rest, type RestOptions } from '../helpers/openapi.js';
import { directory, SCIM_TOKEN, userBody } from '../helpers/scim.js';
import { startReplicas, startTestServer, stopReplicas, type TestServer } from '../helpers/server.js';
import { idpSignedToken } from '../helpers/tokens.js';
import { type ReceivedWebhook, startWebhookReceiver, type WebhookReceiver } from '../helpers/webhookReceiver.js';

// ─── was __tests__/integration/webhook-endpoints.test.ts ───
describe('webhook-endpoints', () => {
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
  const WEAKER =
    'Staff changes need a sign-in with a second factor; sign in again with acr_values and max_age as given.';

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
        await loginWithPkce({
          issuer: server.running.app.issuer,
          username: 'alice',
          password: 'alice',
          scope: 'openid',
        })
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
      const created = await create(alice, {
        url: `http://rebind.test:${receiver.port}/hook`,
        events: ['order.created'],
      });
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
});

// ─── was __tests__/integration/webhook-delivery.test.ts ───
describe('webhook-delivery', () => {
  interface Endpoint {
    id: string;
    secret: string;
  }
  interface Delivery {
    id: string;
    type: string;
    status: string;
    attempts: { at: string; status_code: number | null; error: string | null; duration_ms: number }[];
  }

  /** The short schedule this file runs on: an attempt at once, then after 1 s, then after 1 s more. */
  const SCHEDULE_S = [0, 1, 1];
  const TIMEOUT_MS = 1500;
  const MFA = 'urn:orders:acr:mfa';

  const endpointAt = async (server: TestServer, token: string, url: string, events: string[]): Promise<Endpoint> => {
    const res = await rest(server.url, 'POST', '/webhook-endpoints', { token, body: { url, events } });
    assert.equal(res.status, 201, res.text);
    return res.json<Endpoint>();
  };
  /** Matches the webhooks about one order. */
  const about = (orderId: string) => (r: ReceivedWebhook) => r.payload.data.order?.id === orderId;
  const orderAt = async (server: TestServer, token: string): Promise<string> => {
    const res = await rest(server.url, 'POST', '/orders', {
      token,
      body: { items: [{ sku: 'KB-001', qty: 1 }] },
      headers: { 'idempotency-key': randomUUID() },
    });
    assert.equal(res.status, 201, res.text);
    return res.json<{ id: string }>().id;
  };

  /**
   * Deliveries to real receivers on loopback (so private targets are allowed here), each verified with the
   * `standardwebhooks` package: what is sent, to whom, how often, and what the delivery log says.
   */
  describe('webhook delivery to a receiver on loopback', () => {
    let server: TestServer;
    let alice: string;
    let bob: string;
    let carol: string;
    const receivers: WebhookReceiver[] = [];

    const receiver = async () => {
      const r = await startWebhookReceiver();
      receivers.push(r);
      return r;
    };
    const createEndpoint = (token: string, url: string, events: string[]) => endpointAt(server, token, url, events);
    const placeOrder = (token: string) => orderAt(server, token);
    const deliveries = async (token: string, endpoint: string): Promise<Delivery[]> => {
      const res = await rest(server.url, 'GET', `/webhook-endpoints/${endpoint}/deliveries`, { token });
      assert.equal(res.status, 200, res.text);
      return res.json<{ deliveries: Delivery[] }>().deliveries;
    };
    /** The delivery log once `done` holds for the message (the receiver answers before the attempt is recorded). */
    const logOnce = (token: string, endpoint: string, id: string, done: (d: Delivery) => boolean) =>
      eventually(`the delivery log of ${id}`, async () => {
        const found = (await deliveries(token, endpoint)).find((d) => d.id === id);
        return found && done(found) ? found : undefined;
      });

    beforeAll(async () => {
      server = await startTestServer({
        WEBHOOK_ALLOW_PRIVATE_URLS: 'true',
        WEBHOOK_RETRY_SCHEDULE_S: SCHEDULE_S.join(','),
        WEBHOOK_TIMEOUT_MS: String(TIMEOUT_MS),
        WEBHOOK_POLL_MS: '100',
        WEBHOOK_ENDPOINT_CONCURRENCY: '4',
        SCIM_TOKEN,
      });
      ({ alice, bob, carol } = await server.users());
    });
    afterAll(async () => {
      await server?.close();
      await Promise.all(receivers.map((r) => r.close()));
    });

    test('order.created after a REST create and after a GraphQL create, each verified with Webhook.verify', async () => {
      const hooks = await receiver();
      const endpoint = await createEndpoint(alice, hooks.url, ['order.created']);
      const viaRest = await placeOrder(alice);
      const created = await server.gql(
        'mutation { createOrder(input: { items: [{ sku: "KB-001", qty: 2 }] }) { id } }',
        undefined,
        { token: alice },
      );
      assert.equal(created.status, 200, JSON.stringify(created.body));
      const viaGraphql = (created.body.data!.createOrder as { id: string }).id;

      const got = await hooks.waitFor((all) => all.some(about(viaRest)) && all.some(about(viaGraphql)));
      for (const orderId of [viaRest, viaGraphql]) {
        const message = got.find(about(orderId))!;
        const verified = hooks.verify(message, endpoint.secret) as ReceivedWebhook['payload'];
        assert.equal(verified.type, 'order.created');
        assert.match(message.id, /^msg_[0-9a-z]{26}$/);
        assert.equal(message.headers['content-type'], 'application/json');
        assert.match(message.signature, /^v1,[A-Za-z0-9+/]+=*$/);
        assert.ok(Math.abs(Number(message.timestamp) - Date.now() / 1000) < 60);
        // data.order is the REST representation of the order, as GET /v1/orders/{id} answered it then.
        const current = await rest(server.url, 'GET', `/orders/${orderId}`, { token: alice });
        assert.deepEqual(verified.data, { order: current.json() });
        assert.deepEqual(Object.keys(verified), ['type', 'timestamp', 'data']);
        assert.ok(!Number.isNaN(Date.parse(verified.timestamp)));
      }
      // A signature over anything else does not verify.
      const tampered = {
        ...got.find(about(viaRest))!,
        body: got.find(about(viaRest))!.body.replace('KB-001', 'KB-002'),
      };
      assert.throws(() => hooks.verify(tampered, endpoint.secret), /No matching signature/);
    });

    test('the receiver example of docs/webhooks.md takes each message once and refuses a forged one', async () => {
      const created = await rest(server.url, 'POST', '/webhook-endpoints', {
        token: alice,
        body: { url: 'http://127.0.0.1:9/not-yet', events: ['order.created'] },
      });
      const endpoint = created.json<Endpoint>();
      const events: [OrderWebhook, string][] = [];
      let arrived!: () => void;
      const first = new Promise<void>((resolve) => (arrived = resolve));
      const example = webhookReceiver(endpoint.secret, (event, id) => {
        events.push([event, id]);
        arrived();
      });
      example.listen(0, '127.0.0.1');
      await once(example, 'listening');
      try {
        const url = `http://127.0.0.1:${(example.address() as AddressInfo).port}/hooks`;
        const moved = await rest(server.url, 'PATCH', `/webhook-endpoints/${endpoint.id}`, {
          token: alice,
          body: { url },
          headers: { 'if-match': created.headers.get('etag')! },
        });
        assert.equal(moved.status, 200, moved.text);
        const orderId = await placeOrder(alice);
        await first;
        assert.equal(events.length, 1);
        assert.equal(events[0]![0].type, 'order.created');
        assert.equal(events[0]![0].data.order!.id, orderId);
        const log = await logOnce(alice, endpoint.id, events[0]![1], (d) => d.status === 'delivered');
        assert.deepEqual(
          log.attempts.map((a) => a.status_code),
          [204],
        );
        const forged = await fetch(url, {
          method: 'POST',
          headers: {
            'content-type': 'application/json',
            'webhook-id': 'msg_forged',
            'webhook-timestamp': String(Math.floor(Date.now() / 1000)),
            'webhook-signature': 'v1,AAAA',
          },
          body: JSON.stringify({ type: 'order.created', timestamp: new Date().toISOString(), data: {} }),
        });
        assert.equal(forged.status, 401);
        assert.equal(events.length, 1);
      } finally {
        example.close();
        // The endpoint goes with its receiver: left in place, alice's later orders would wait in the queue for a
        // closed port, and the backlog the next tests read would count them.
        const deleted = await rest(server.url, 'DELETE', `/webhook-endpoints/${endpoint.id}`, { token: alice });
        assert.equal(deleted.status, 204, deleted.text);
      }
    });

    test("alice's endpoint never receives bob's orders; carol's (staff) receives both", async () => {
      const [forAlice, forBob, forCarol] = [await receiver(), await receiver(), await receiver()];
      const endpoints = {
        alice: await createEndpoint(alice, forAlice.url, ['order.created']),
        bob: await createEndpoint(bob, forBob.url, ['order.created']),
        carol: await createEndpoint(carol, forCarol.url, ['order.created']),
      };
      const ofAlice = await placeOrder(alice);
      const ofBob = await placeOrder(bob);
      await forCarol.waitFor((all) => all.some(about(ofAlice)) && all.some(about(ofBob)), "both orders at carol's");
      await forAlice.waitFor((all) => all.some(about(ofAlice)), "alice's order at alice's");
      await forBob.waitFor((all) => all.some(about(ofBob)), "bob's order at bob's");
      // Each event's messages are made in one transaction: what alice's and bob's endpoints hold now is all they get.
      const types = async (token: string, endpoint: Endpoint) =>
        (await deliveries(token, endpoint.id)).map((d) => d.type).sort();
      assert.deepEqual(await types(alice, endpoints.alice), ['order.created']);
      assert.deepEqual(await types(bob, endpoints.bob), ['order.created']);
      assert.equal(forAlice.received.filter(about(ofBob)).length, 0);
      assert.equal(forBob.received.filter(about(ofAlice)).length, 0);
      for (const [hooks, endpoint] of [
        [forAlice, endpoints.alice],
        [forBob, endpoints.bob],
        [forCarol, endpoints.carol],
      ] as const) {
        for (const message of hooks.received) hooks.verify(message, endpoint.secret);
      }
    });

    test('500, 500, then 200: three attempts with one webhook-id on the schedule, and the log shows them', async () => {
      const hooks = await receiver();
      const owner = await idpSignedToken(server, { sub: `retried-${randomUUID()}`, expiresIn: 600 });
      const endpoint = await createEndpoint(owner, hooks.url, ['order.created']);
      hooks.answer({ status: 500 }, { status: 500 }, { status: 200 });
      const orderId = await placeOrder(owner);
      const got = (await hooks.waitFor((all) => all.filter(about(orderId)).length >= 3)).filter(about(orderId));
      assert.equal(got.length, 3);
      assert.equal(new Set(got.map((m) => m.id)).size, 1, 'the same webhook-id on every attempt');
      for (const message of got) hooks.verify(message, endpoint.secret);
      for (let i = 1; i < got.length; i++) {
        assert.ok(
          got[i]!.at - got[i - 1]!.at >= SCHEDULE_S[i]! * 1000 - 50,
          `attempt ${i + 1} came ${got[i]!.at - got[i - 1]!.at} ms after the one before; the schedule says ${SCHEDULE_S[i]} s`,
        );
      }
      const logged = await logOnce(owner, endpoint.id, got[0]!.id, (d) => d.status === 'delivered');
      assert.equal(logged.type, 'order.created');
      assert.deepEqual(
        logged.attempts.map((a) => [a.status_code, a.error]),
        [
          [500, 'HTTP 500'],
          [500, 'HTTP 500'],
          [200, null],
        ],
      );
      const times = logged.attempts.map((a) => Date.parse(a.at));
      assert.ok(times[0]! < times[1]! && times[1]! < times[2]!, 'increasing attempt times');
      assert.ok((await server.counter('webhook_deliveries_total{result="http_error"}')) >= 2);
      assert.ok((await server.counter('webhook_deliveries_total{result="success"}')) >= 1);
      assert.ok((await server.counter('webhook_delivery_seconds_count')) >= 3);
      // Nothing is due any more (the message is delivered, every other one of this order too): no backlog.
      assert.equal(await server.counter('webhook_backlog'), 0);
    });

    test('retry sends a delivered message again with its webhook-id; ping sends a ping; both show in the log', async () => {
      const hooks = await receiver();
      const endpoint = await createEndpoint(alice, hooks.url, ['order.created']);
      const orderId = await placeOrder(alice);
      const [first] = await hooks.waitFor((all) => all.some(about(orderId)));
      await logOnce(alice, endpoint.id, first!.id, (d) => d.status === 'delivered');

      const retried = await rest(
        server.url,
        'POST',
        `/webhook-endpoints/${endpoint.id}/deliveries/${first!.id}/retry`,
        {
          token: alice,
        },
      );
      assert.equal(retried.status, 202, retried.text);
      assert.equal(retried.json<Delivery>().id, first!.id);
      const again = await hooks.waitFor((all) => all.filter((m) => m.id === first!.id).length === 2);
      hooks.verify(again.at(-1)!, endpoint.secret);
      await logOnce(alice, endpoint.id, first!.id, (d) => d.status === 'delivered' && d.attempts.length === 2);

      const pinged = await rest(server.url, 'POST', `/webhook-endpoints/${endpoint.id}/ping`, { token: alice });
      assert.equal(pinged.status, 202, pinged.text);
      const ping = pinged.json<Delivery>();
      assert.equal(ping.type, 'ping');
      const [received] = (await hooks.waitFor((all) => all.some((m) => m.id === ping.id))).filter(
        (m) => m.id === ping.id,
      );
      assert.deepEqual(hooks.verify(received!, endpoint.secret), {
        type: 'ping',
        timestamp: received!.payload.timestamp,
        data: { endpoint_id: endpoint.id },
      });
      await logOnce(alice, endpoint.id, ping.id, (d) => d.status === 'delivered');

      const unknown = await rest(
        server.url,
        'POST',
        `/webhook-endpoints/${endpoint.id}/deliveries/msg_00000000000000000000000000/retry`,
        { token: alice },
      );
      assert.equal(unknown.status, 404);
      const notHers = await rest(server.url, 'POST', `/webhook-endpoints/${endpoint.id}/ping`, { token: bob });
      assert.equal(notHers.status, 404);
    });

    test('after a rotation both secrets verify each message (two signatures), until the old one expires', async () => {
      const hooks = await receiver();
      const endpoint = await createEndpoint(alice, hooks.url, ['order.created']);
      const rotated = await rest(server.url, 'POST', `/webhook-endpoints/${endpoint.id}/rotate-secret`, {
        token: alice,
      });
      assert.equal(rotated.status, 200, rotated.text);
      const fresh = rotated.json<Endpoint>().secret;
      assert.notEqual(fresh, endpoint.secret);
      const orderId = await placeOrder(alice);
      const [message] = (await hooks.waitFor((all) => all.some(about(orderId)))).filter(about(orderId));
      assert.equal(message!.signature.split(' ').length, 2);
      assert.ok(hooks.verify(message!, fresh));
      assert.ok(hooks.verify(message!, endpoint.secret));
      assert.throws(() => hooks.verify(message!, `whsec_${Buffer.alloc(32, 7).toString('base64')}`));
    });

    test('status changes: order.status_changed, and a cancellation is also order.cancelled', async () => {
      const hooks = await receiver();
      const endpoint = await createEndpoint(alice, hooks.url, ['order.status_changed', 'order.cancelled']);
      const paid = await placeOrder(alice);
      const cancelled = await placeOrder(alice);
      const etagOf = async (id: string) =>
        (await rest(server.url, 'GET', `/orders/${id}`, { token: alice })).headers.get('etag')!;
      const patch = async (token: string, id: string, status: string) => {
        const res = await rest(server.url, 'PATCH', `/orders/${id}`, {
          token,
          body: { status },
          headers: { 'if-match': await etagOf(id) },
        });
        assert.equal(res.status, 200, res.text);
      };
      await patch(carol, paid, 'paid');
      await patch(alice, cancelled, 'cancelled');
      const got = await hooks.waitFor(
        (all) => all.filter(about(paid)).length >= 1 && all.filter(about(cancelled)).length >= 2,
      );
      for (const m of got) hooks.verify(m, endpoint.secret);
      assert.deepEqual(
        got.filter(about(paid)).map((m) => [m.payload.type, m.payload.data.order!.status]),
        [['order.status_changed', 'paid']],
      );
      assert.deepEqual(
        got
          .filter(about(cancelled))
          .map((m) => [m.payload.type, m.payload.data.order!.status])
          .sort(),
        [
          ['order.cancelled', 'cancelled'],
          ['order.status_changed', 'cancelled'],
        ],
      );
    });

    test('a redirect is not followed; a stalled receiver times out; a large answer is read only so far', async () => {
      const [redirecting, target] = [await receiver(), await receiver()];
      const endpoint = await createEndpoint(alice, redirecting.url, ['order.created']);
      redirecting.answer({ status: 302, headers: { location: target.url } });
      const ping = async () => {
        const res = await rest(server.url, 'POST', `/webhook-endpoints/${endpoint.id}/ping`, { token: alice });
        assert.equal(res.status, 202);
        return res.json<Delivery>().id;
      };
      const redirected = await ping();
      const log = await logOnce(alice, endpoint.id, redirected, (d) => d.status === 'failed');
      assert.deepEqual(
        log.attempts.map((a) => [a.status_code, a.error]),
        [[302, 'HTTP 302']],
      );
      assert.equal(target.connections(), 0, 'the redirect target was never contacted');

      let release!: () => void;
      redirecting.answer({ holdUntil: new Promise<void>((resolve) => (release = resolve)) });
      const stalled = await ping();
      const timedOut = await logOnce(alice, endpoint.id, stalled, (d) => d.status === 'failed');
      release();
      assert.deepEqual(
        timedOut.attempts.map((a) => [a.status_code, a.error]),
        [[null, `no answer within ${TIMEOUT_MS} ms`]],
      );
      assert.ok(timedOut.attempts[0]!.duration_ms >= TIMEOUT_MS - 50);

      redirecting.answer({ status: 200, body: Buffer.alloc(1024 * 1024, 'x') });
      const large = await ping();
      const read = await logOnce(alice, endpoint.id, large, (d) => d.status === 'delivered');
      assert.deepEqual(
        read.attempts.map((a) => a.status_code),
        [200],
      );
      assert.ok((await server.counter('webhook_deliveries_total{result="timeout"}')) >= 1);
    });

    test("a deactivated owner's endpoint receives nothing; another owner's receives the same event", async () => {
      const subject = `dora-${randomUUID()}`;
      const dir = directory(server.url);
      const provisioned = await dir.post('/Users', userBody(`${subject}@example.com`, { externalId: subject }));
      assert.equal(provisioned.status, 201, provisioned.text);
      const dora = await idpSignedToken(server, { sub: subject, expiresIn: 600 });
      const [forDora, forCarol] = [await receiver(), await receiver()];
      const doras = await createEndpoint(dora, forDora.url, ['order.created', 'order.status_changed']);
      await createEndpoint(carol, forCarol.url, ['order.status_changed']);
      const orderId = await placeOrder(dora);
      await forDora.waitFor((all) => all.some(about(orderId)), "dora's order.created");

      const deactivated = await dir.patch(`/Users/${(provisioned.body as { id: string }).id}`, [
        { op: 'replace', path: 'active', value: false },
      ]);
      assert.equal(deactivated.status, 200, deactivated.text);
      const etag = (await rest(server.url, 'GET', `/orders/${orderId}`, { token: carol })).headers.get('etag')!;
      const paid = await rest(server.url, 'PATCH', `/orders/${orderId}`, {
        token: carol,
        body: { status: 'paid' },
        headers: { 'if-match': etag },
      });
      assert.equal(paid.status, 200, paid.text);
      await forCarol.waitFor((all) => all.some(about(orderId)), "carol's order.status_changed");

      // Back again, with a token from after the reactivation: the log shows the one message made before.
      const reactivated = await dir.patch(`/Users/${(provisioned.body as { id: string }).id}`, [
        { op: 'replace', path: 'active', value: true },
      ]);
      assert.equal(reactivated.status, 200);
      const doraAgain = await idpSignedToken(server, { sub: subject, expiresIn: 600 });
      assert.deepEqual(
        (await deliveries(doraAgain, doras.id)).map((d) => d.type),
        ['order.created'],
      );
      assert.equal(forDora.received.filter(about(orderId)).length, 1);
    });
  });

  /**
   * The per-endpoint bound, on a server whose attempts outlast the test (the file's own is cut at TIMEOUT_MS, which
   * on a loaded machine could end a held attempt before the bound is reached): only the receiver ends them.
   */
  describe('webhook delivery to a receiver that holds every connection', () => {
    let server: TestServer;
    let slow: WebhookReceiver;
    let fast: WebhookReceiver;
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));

    beforeAll(async () => {
      server = await startTestServer({
        WEBHOOK_ALLOW_PRIVATE_URLS: 'true',
        WEBHOOK_TIMEOUT_MS: '60000',
        WEBHOOK_POLL_MS: '100',
        WEBHOOK_ENDPOINT_CONCURRENCY: '4',
      });
    });
    afterAll(async () => {
      release();
      await server?.close();
      await Promise.all([slow?.close(), fast?.close()]);
    });

    test('a slow receiver holds only its own endpoint: exactly 4 attempts at once there, the others go on', async () => {
      [slow, fast] = [await startWebhookReceiver(), await startWebhookReceiver()];
      const owner = await idpSignedToken(server, { sub: `slow-${randomUUID()}`, expiresIn: 600 });
      await endpointAt(server, owner, slow.url, ['order.created']);
      await endpointAt(server, owner, fast.url, ['order.created']);
      slow.answer(...Array.from({ length: 6 }, () => ({ holdUntil: held })));
      const orders = await Promise.all(Array.from({ length: 6 }, () => orderAt(server, owner)));
      // Six messages are due there at once: the endpoint's bound is reached, and the other two wait.
      await slow.waitFor((all) => all.length === 4, 'four attempts at the slow receiver');
      assert.equal(slow.inFlight(), 4);
      await fast.waitFor((all) => orders.every((id) => all.some(about(id))), 'every order at the fast receiver');
      release();
      await slow.waitFor((all) => orders.every((id) => all.some(about(id))), 'every order at the slow one, later');
      assert.equal(slow.maxInFlight(), 4, `${slow.maxInFlight()} attempts at once at the slow receiver`);
    });
  });

  /**
   * One owner's slow receiver against another owner's webhooks, on two replicas: each replica sends at most
   * WEBHOOK_OWNER_CONCURRENCY attempts for one owner, so the other owner's message goes out while every one of the
   * slow owner's connections is still held open.
   */
  describe('webhook delivery on two replicas: owner bounds, and an owner whose privileges change', () => {
    const OWNER_CAP = 3;
    let replicas: { a: TestServer; b: TestServer };
    let slow: WebhookReceiver;
    let fast: WebhookReceiver;
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));

    beforeAll(async () => {
      replicas = await startReplicas({
        WEBHOOK_ALLOW_PRIVATE_URLS: 'true',
        // Far longer than the test: the slow owner's attempts end only when the receiver lets them go.
        WEBHOOK_TIMEOUT_MS: '60000',
        WEBHOOK_POLL_MS: '100',
        WEBHOOK_CONCURRENCY: '8',
        WEBHOOK_ENDPOINT_CONCURRENCY: '4',
        WEBHOOK_OWNER_CONCURRENCY: String(OWNER_CAP),
        WEBHOOK_RETRY_SCHEDULE_S: '0,1,1',
      });
      [slow, fast] = [await startWebhookReceiver(), await startWebhookReceiver()];
    });
    afterAll(async () => {
      release();
      if (replicas) await stopReplicas(replicas);
      await Promise.all([slow?.close(), fast?.close()]);
    });

    test("bob's 5 endpoints at a receiver that holds every connection do not delay alice's webhook", async () => {
      const { a, b } = replicas;
      const bob = await idpSignedToken(a, { sub: `bob-${randomUUID()}`, expiresIn: 600 });
      const alice = await idpSignedToken(a, { sub: `alice-${randomUUID()}`, expiresIn: 600 });
      slow.answer(...Array.from({ length: 40 }, () => ({ holdUntil: held })));
      for (let i = 0; i < 5; i++) {
        const res = await rest(a.url, 'POST', '/webhook-endpoints', {
          token: bob,
          body: { url: slow.url, events: ['order.created'] },
        });
        assert.equal(res.status, 201, res.text);
      }
      const forAlice = await rest(b.url, 'POST', '/webhook-endpoints', {
        token: alice,
        body: { url: fast.url, events: ['order.created'] },
      });
      assert.equal(forAlice.status, 201, forAlice.text);
      const place = async (server: TestServer, token: string) => {
        const res = await rest(server.url, 'POST', '/orders', {
          token,
          body: { items: [{ sku: 'KB-001', qty: 1 }] },
          headers: { 'idempotency-key': randomUUID() },
        });
        assert.equal(res.status, 201, res.text);
        return res.json<{ id: string }>().id;
      };
      // 4 orders × 5 endpoints: 20 messages for bob, more than both replicas' 16 slots without an owner bound.
      for (let i = 0; i < 4; i++) await place(i % 2 ? b : a, bob);
      // Each replica holds exactly its owner bound of bob's attempts open at his receiver.
      await slow.waitFor((all) => all.length === 2 * OWNER_CAP, "bob's attempts held on both replicas");
      assert.equal(slow.inFlight(), 2 * OWNER_CAP);

      const ofAlice = await place(b, alice);
      const [got] = await fast.waitFor(
        (all) => all.some((r) => r.payload.data.order?.id === ofAlice),
        "alice's",
        15_000,
      );
      assert.equal(got!.payload.type, 'order.created');
      // Alice's message went out while every one of bob's connections was still open, and no more of his were sent.
      assert.equal(slow.inFlight(), 2 * OWNER_CAP);
      assert.equal(slow.received.length, 2 * OWNER_CAP);
      assert.equal(slow.maxInFlight(), 2 * OWNER_CAP);

      release();
      await slow.waitFor((all) => all.length === 20, "all of bob's messages, once let go", 15_000);
      assert.equal(slow.maxInFlight(), 2 * OWNER_CAP, 'never more than the owner bound per replica');
    });

    test("a demoted staff member's endpoint gets only their own orders, pending ones are cancelled, retries refused", async () => {
      const { a, b } = replicas;
      const now = Math.floor(Date.now() / 1000);
      const sub = `dave-${randomUUID()}`;
      // Staff with a recent second factor, as a token issued a minute ago; then the IdP drops the role (a newer token).
      const staffClaims = { roles: ['staff'], iat: now - 60, acr: MFA, auth_time: now - 60 };
      const asStaff = await idpSignedToken(a, { sub, expiresIn: 600, claims: staffClaims });
      const customer = await idpSignedToken(a, { sub: `erin-${randomUUID()}`, expiresIn: 600 });
      let answer: (() => void) | undefined;
      const [forDave, forErin, moved, forFrank] = [
        await startWebhookReceiver(),
        await startWebhookReceiver(),
        await startWebhookReceiver(),
        await startWebhookReceiver(),
      ];
      try {
        const call = (server: TestServer, method: string, path: string, opts: RestOptions) =>
          rest(server.url, method, path, opts);
        const created = await call(a, 'POST', '/webhook-endpoints', {
          token: asStaff,
          body: { url: forDave.url, events: ['order.created', 'order.status_changed'] },
        });
        assert.equal(created.status, 201, created.text);
        const endpoint = created.json<Endpoint>();
        const erins = await call(b, 'POST', '/webhook-endpoints', {
          token: customer,
          body: { url: forErin.url, events: ['order.created'] },
        });
        assert.equal(erins.status, 201, erins.text);
        const place = async (server: TestServer, token: string) => {
          const res = await call(server, 'POST', '/orders', {
            token,
            body: { items: [{ sku: 'KB-001', qty: 1 }] },
            headers: { 'idempotency-key': randomUUID() },
          });
          assert.equal(res.status, 201, res.text);
          return res.json<{ id: string }>().id;
        };
        const log = async (token: string) => {
          const res = await call(b, 'GET', `/webhook-endpoints/${endpoint.id}/deliveries`, { token });
          assert.equal(res.status, 200, res.text);
          return res.json<{ deliveries: Delivery[] }>().deliveries;
        };

        // While staff: another customer's order arrives; a second one is held open at the receiver.
        const first = await place(a, customer);
        const [sent] = (await forDave.waitFor((all) => all.some(about(first)), "erin's first order at dave's")).filter(
          about(first),
        );
        forDave.answer({ holdUntil: new Promise<void>((resolve) => (answer = resolve)), status: 500 });
        const pending = await place(b, customer);
        const [held] = (await forDave.waitFor((all) => all.some(about(pending)), 'the held one')).filter(
          about(pending),
        );

        // Demoted: the newer token (on the other replica) has no roles. His order list is his own, empty.
        const demoted = await idpSignedToken(b, { sub, expiresIn: 600 });
        const orders = await call(b, 'GET', '/orders', { token: demoted });
        assert.equal(orders.status, 200, orders.text);
        assert.deepEqual(orders.json<{ orders: unknown[] }>().orders, []);

        // The held attempt fails; its retry is cancelled instead of sent: dave may no longer read erin's order.
        answer!();
        const cancelled = await eventually('the held message cancelled', async () => {
          const found = (await log(demoted)).find((d) => d.id === held!.id);
          return found?.status === 'cancelled' ? found : undefined;
        });
        assert.deepEqual(
          cancelled.attempts.map((x) => [x.status_code, x.error]),
          [[500, 'HTTP 500']],
        );
        assert.equal(forDave.received.filter(about(pending)).length, 1);

        // A new order of erin's reaches erin's endpoint and makes no message for dave's (one transaction makes both).
        const later = await place(a, customer);
        await forErin.waitFor((all) => all.some(about(later)), "erin's later order at erin's");
        assert.deepEqual((await log(demoted)).map((d) => d.id).sort(), [sent!.id, held!.id].sort());
        // His own orders still reach him.
        const own = await place(b, demoted);
        await forDave.waitFor((all) => all.some(about(own)), "dave's own order");
        assert.equal(forDave.received.filter(about(later)).length, 0);

        // Moving the endpoint and retrying an old message about erin's order: refused, nothing is sent.
        const etag = (await call(a, 'GET', `/webhook-endpoints/${endpoint.id}`, { token: demoted })).headers.get(
          'etag',
        )!;
        const patched = await call(a, 'PATCH', `/webhook-endpoints/${endpoint.id}`, {
          token: demoted,
          body: { url: moved.url },
          headers: { 'if-match': etag },
        });
        assert.equal(patched.status, 200, patched.text);
        const retried = await call(a, 'POST', `/webhook-endpoints/${endpoint.id}/deliveries/${sent!.id}/retry`, {
          token: demoted,
        });
        assert.equal(retried.status, 403, retried.text);
        assert.equal(retried.headers.get('content-type'), 'application/problem+json; charset=utf-8');
        assert.deepEqual(retried.json(), {
          type: '/problems/forbidden',
          title: 'Forbidden',
          status: 403,
          detail: 'This message is about an order you may no longer read; it is not sent.',
          instance: `/v1/webhook-endpoints/${endpoint.id}/deliveries/${sent!.id}/retry`,
          code: 'FORBIDDEN',
        });
        const ownMessage = (await log(demoted)).find(
          (d) => d.type === 'order.created' && ![sent!.id, held!.id].includes(d.id),
        )!;
        const again = await call(b, 'POST', `/webhook-endpoints/${endpoint.id}/deliveries/${ownMessage.id}/retry`, {
          token: demoted,
        });
        assert.equal(again.status, 202, again.text);
        const [resent] = await moved.waitFor((all) => all.length === 1, 'his own order, re-sent to the new URL');
        assert.equal(resent!.payload.data.order!.id, own);

        // Roles seen expire: an owner whose newest staff token is past 24 hours old gets only their own orders, until
        // a newer staff token is seen.
        const frank = `frank-${randomUUID()}`;
        const oldStaff = await idpSignedToken(a, {
          sub: frank,
          expiresIn: 600,
          claims: { ...staffClaims, iat: now - 24 * 3600 - 60 },
        });
        const franks = await call(a, 'POST', '/webhook-endpoints', {
          token: oldStaff,
          body: { url: forFrank.url, events: ['order.created'] },
        });
        assert.equal(franks.status, 201, franks.text);
        const unseen = await place(a, customer);
        await forErin.waitFor((all) => all.some(about(unseen)), "erin's order at erin's");
        assert.deepEqual(
          await (async () => {
            const res = await call(b, 'GET', `/webhook-endpoints/${franks.json<Endpoint>().id}/deliveries`, {
              token: oldStaff,
            });
            return res.json<{ deliveries: Delivery[] }>().deliveries;
          })(),
          [],
        );
        const fresh = await idpSignedToken(b, { sub: frank, expiresIn: 600, claims: { roles: ['staff'] } });
        assert.equal((await call(b, 'GET', '/orders?limit=1', { token: fresh })).status, 200);
        const seen = await place(a, customer);
        await forFrank.waitFor((all) => all.some(about(seen)), "erin's order at frank's, staff again");
        assert.equal(forFrank.received.filter(about(unseen)).length, 0);
      } finally {
        answer?.();
        await Promise.all([forDave.close(), forErin.close(), moved.close(), forFrank.close()]);
      }
    });
  });
});

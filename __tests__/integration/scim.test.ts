// SCIM provisioning and deactivation, in one Jest file: a file loads its modules into a fresh context and costs about
// 1.5 s of CPU before its first test (docs/testing.md#how-long-it-takes). Each top-level describe block below was a
// test file of its own, named after it (the comment above it gives the old file name), with its tests unchanged,
// starting the servers it starts; none shares a server with another block.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { connect } from 'node:net';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { afterAll, beforeAll, describe, test } from '@jest/globals';
import request from 'supertest';
import { loginWithPkce } from '../../src/auth/pkceLogin.js';
import {
  assertScimError,
  directory,
  type Directory,
  directoryAccessToken,
  ERROR_SCHEMA,
  GROUP_SCHEMA,
  SCIM_JSON,
  SCIM_TOKEN,
  USER_SCHEMA,
  userBody,
} from '../helpers/scim.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { cookieClient, ORDER_CREATED, rawSocket, sseStream, within } from '../helpers/streams.js';
import { subscriber } from '../helpers/subscriber.js';
import { signIn, WebClient } from '../helpers/webClient.js';
import { startWebhookReceiver, type WebhookReceiver } from '../helpers/webhookReceiver.js';

// ─── was __tests__/integration/scim-protocol.test.ts ───
describe('scim-protocol', () => {
  interface ScimUser {
    id: string;
    userName: string;
    externalId?: string;
    displayName?: string;
    name?: Record<string, string>;
    emails?: { value: string; type?: string; primary?: boolean; display?: string }[];
    active: boolean;
    meta: { resourceType: string; created: string; lastModified: string; version: string; location: string };
  }

  interface ScimGroup {
    id: string;
    displayName: string;
    members?: { value: string; display: string; type: string; $ref: string }[];
    meta: { version: string; location: string };
  }

  interface ListResponse<T> {
    schemas: string[];
    totalResults: number;
    startIndex: number;
    itemsPerPage: number;
    Resources: T[];
  }

  /** A distinct client address per test, so each spends a rate budget of its own. */
  let nextIp = 1;
  const ipOf = () => `10.0.${Math.floor(nextIp / 250)}.${(nextIp++ % 250) + 1}`;

  /** A userName no other test uses. */
  const unique = (label: string) => `${label}-${randomUUID().slice(0, 8)}@example.com`;

  describe('SCIM 2.0 service provider (/scim/v2)', () => {
    let server: TestServer;
    let dir: Directory;

    beforeAll(async () => {
      // TRUST_PROXY lets each test speak from an address of its own (X-Forwarded-For).
      // BODY_IDLE_TIMEOUT_S: a stalled body is answered (408) within a test's patience.
      server = await startTestServer({ SCIM_TOKEN, TRUST_PROXY: '1', BODY_IDLE_TIMEOUT_S: '2' });
      dir = directory(server.url, { ip: ipOf() });
    });
    afterAll(() => server?.close());

    const create = async (userName = unique('user'), more: Record<string, unknown> = {}) => {
      const res = await dir.post('/Users', userBody(userName, more));
      assert.equal(res.status, 201, res.text);
      return res.body as ScimUser;
    };

    test('discovery says truthfully what is supported, in application/scim+json', async () => {
      const config = await dir.get('/ServiceProviderConfig').expect(200);
      assert.equal(config.headers['content-type'], SCIM_JSON);
      assert.equal(config.headers['cache-control'], 'no-store');
      assert.deepEqual(config.body.schemas, ['urn:ietf:params:scim:schemas:core:2.0:ServiceProviderConfig']);
      assert.deepEqual(config.body.patch, { supported: true });
      assert.deepEqual(config.body.bulk, { supported: false, maxOperations: 0, maxPayloadSize: 0 });
      assert.deepEqual(config.body.filter, { supported: true, maxResults: 1000 });
      assert.deepEqual(config.body.sort, { supported: false });
      assert.deepEqual(config.body.changePassword, { supported: false });
      assert.deepEqual(config.body.etag, { supported: true });
      assert.equal(config.body.authenticationSchemes[0].type, 'oauthbearertoken');
      assert.equal(config.body.meta.location, `${server.running.publicUrl}/scim/v2/ServiceProviderConfig`);

      const types = await dir.get('/ResourceTypes').expect(200);
      assert.equal(types.body.totalResults, 2);
      assert.deepEqual(
        (types.body.Resources as { id: string; endpoint: string; schema: string }[]).map((t) => [
          t.id,
          t.endpoint,
          t.schema,
        ]),
        [
          ['User', '/Users', USER_SCHEMA],
          ['Group', '/Groups', GROUP_SCHEMA],
        ],
      );
      assert.equal((await dir.get('/ResourceTypes/Group').expect(200)).body.endpoint, '/Groups');
      assertScimError(await dir.get('/ResourceTypes/Device'), 404);

      const schemas = await dir.get('/Schemas').expect(200);
      const user = (schemas.body.Resources as { id: string; attributes: { name: string }[] }[]).find(
        (s) => s.id === USER_SCHEMA,
      )!;
      assert.deepEqual(
        user.attributes.map((a) => a.name),
        ['userName', 'name', 'displayName', 'emails', 'active'],
      );
      const one = await dir.get(`/Schemas/${GROUP_SCHEMA}`).expect(200);
      assert.deepEqual(
        (one.body.attributes as { name: string }[]).map((a) => a.name),
        ['displayName', 'members'],
      );
      // RFC 7644 §4: a filter on a discovery endpoint is refused rather than seemingly applied.
      assertScimError(await dir.get('/Schemas?filter=id%20eq%20%22x%22'), 403);
      assertScimError(await dir.get('/ServiceProviderConfig?filter=x%20pr'), 403);
    });

    test('only the directory gets in: SCIM_TOKEN or an access token with scope scim; every refusal is a SCIM error', async () => {
      const ip = ipOf();
      const none = await server.http.get('/scim/v2/Users').set('x-forwarded-for', ip);
      assertScimError(none, 401);
      assert.equal(none.headers['www-authenticate'], 'Bearer realm="orders-api"');
      assert.equal(none.headers['cache-control'], 'no-store');

      const wrong = await directory(server.url, { token: `${SCIM_TOKEN.slice(0, -1)}X`, ip }).get('/Users');
      assertScimError(wrong, 401);
      assert.equal(
        wrong.headers['www-authenticate'],
        'Bearer realm="orders-api", error="invalid_token", error_description="The token is not accepted here"',
      );
      const basic = await server.http
        .get('/scim/v2/Users')
        .set({ 'x-forwarded-for': ip, authorization: `Basic ${SCIM_TOKEN}` });
      assertScimError(basic, 401);
      // Never reachable without credentials: not even a path that does not exist says so.
      assertScimError(await server.http.get('/scim/v2/Nothing').set('x-forwarded-for', ip), 401);
      assertScimError(await server.http.post('/scim/v2/Users').set('x-forwarded-for', ip).send('{'), 401);

      // A person's access token is not the directory's.
      const alice = await server.token('alice');
      const person = await directory(server.url, { token: alice, ip }).get('/Users');
      assertScimError(person, 403);
      assert.equal(
        person.headers['www-authenticate'],
        'Bearer realm="orders-api", error="insufficient_scope", error_description="The scim scope is required"',
      );

      // The embedded IdP's `directory` client, by the client-credentials grant.
      const token = await directoryAccessToken(server.running.app.issuer);
      const listed = await directory(server.url, { token, ip }).get('/Users?count=1').expect(200);
      assert.equal(listed.headers['content-type'], SCIM_JSON);

      // Outside /scim/v2, /scim still answers in the SCIM error schema.
      assertScimError(await server.http.get('/scim/v1/Users'), 404);
    });

    test('a user is created, read, replaced, patched and deleted, with meta.version as a strong ETag', async () => {
      const userName = unique('lifecycle');
      const created = await dir.post(
        '/Users',
        userBody(userName, {
          externalId: `ext-${userName}`,
          displayName: 'Life Cycle',
          name: { givenName: 'Life', familyName: 'Cycle' },
          emails: [{ value: userName, type: 'work', primary: true }],
        }),
      );
      assert.equal(created.status, 201);
      const user = created.body as ScimUser;
      assert.match(user.id, /^usr_[0-9a-z]{26}$/);
      assert.equal(created.headers.location, `${server.running.publicUrl}/scim/v2/Users/${user.id}`);
      assert.equal(created.headers.etag, `"${user.id}.v1"`);
      assert.deepEqual(user, {
        schemas: [USER_SCHEMA],
        id: user.id,
        externalId: `ext-${userName}`,
        userName,
        name: { givenName: 'Life', familyName: 'Cycle' },
        displayName: 'Life Cycle',
        emails: [{ value: userName, type: 'work', primary: true }],
        active: true,
        meta: {
          resourceType: 'User',
          created: user.meta.created,
          lastModified: user.meta.lastModified,
          version: `"${user.id}.v1"`,
          location: created.headers.location,
        },
      });

      const read = await dir.get(`/Users/${user.id}`).expect(200);
      assert.equal(read.headers.etag, user.meta.version);
      assert.deepEqual(read.body, user);
      const unchanged = await dir.get(`/Users/${user.id}`, { 'if-none-match': `W/${user.meta.version}` });
      assert.equal(unchanged.status, 304);

      // PUT replaces everything: attributes left out are unassigned.
      const stale = await dir.put(`/Users/${user.id}`, userBody(userName), { 'if-match': '"usr_x.v9"' });
      assertScimError(stale, 412);
      const replaced = await dir.put(`/Users/${user.id}`, userBody(userName, { displayName: 'Replaced' }), {
        'if-match': user.meta.version,
      });
      assert.equal(replaced.status, 200);
      assert.equal(replaced.headers.etag, `"${user.id}.v2"`);
      assert.deepEqual(
        { ...replaced.body, meta: undefined },
        { schemas: [USER_SCHEMA], id: user.id, userName, displayName: 'Replaced', active: true, meta: undefined },
      );

      // A weak tag never satisfies If-Match (RFC 9110 §13.1.1).
      const weak = await dir.patch(`/Users/${user.id}`, [{ op: 'replace', path: 'displayName', value: 'x' }], {
        'if-match': `W/"${user.id}.v2"`,
      });
      assertScimError(weak, 412);
      assertScimError(await dir.delete(`/Users/${user.id}`, { 'if-match': `"${user.id}.v1"` }), 412);
      assertScimError(
        await dir.put(`/Users/${user.id}`, userBody(userName), { 'if-match': 'nonsense' }),
        400,
        'invalidSyntax',
      );

      const deleted = await dir.delete(`/Users/${user.id}`, { 'if-match': `"${user.id}.v2"` });
      assert.equal(deleted.status, 204);
      assert.equal(deleted.text, '');
      assertScimError(await dir.get(`/Users/${user.id}`), 404);
      assertScimError(await dir.delete(`/Users/${user.id}`), 404);
      assertScimError(await dir.get('/Users/not-an-id'), 404);

      // The directory may provision the person again: a new user, a new id.
      const again = await create(userName);
      assert.notEqual(again.id, user.id);
    });

    test('userName and externalId are unique: a repeated POST gets 409 uniqueness, also under 20 at once', async () => {
      const userName = unique('twice');
      const first = await create(userName, { externalId: `ext-${userName}` });
      assertScimError(await dir.post('/Users', userBody(userName.toUpperCase())), 409, 'uniqueness');
      assertScimError(
        await dir.post('/Users', userBody(unique('other'), { externalId: `ext-${userName}` })),
        409,
        'uniqueness',
      );
      // A replace may not take another user's userName either.
      const second = await create();
      assertScimError(await dir.put(`/Users/${second.id}`, userBody(userName)), 409, 'uniqueness');
      assert.equal(first.userName, userName);

      const racing = unique('race');
      const answers = await Promise.all(Array.from({ length: 20 }, () => dir.post('/Users', userBody(racing))));
      assert.deepEqual(answers.map((a) => a.status).sort(), [201, ...Array(19).fill(409)]);
      for (const refused of answers.filter((a) => a.status === 409)) assertScimError(refused, 409, 'uniqueness');
      const listed = await dir.get(`/Users?filter=${encodeURIComponent(`userName eq "${racing}"`)}`).expect(200);
      assert.equal(listed.body.totalResults, 1);
    });

    test('userName is kept in NFKC without default-ignorable code points: an invisible or fullwidth twin is 409 uniqueness', async () => {
      const userName = unique('twin');
      const first = await create(userName);
      const [local, domain] = userName.split('@') as [string, string];
      const fullwidth = [...local].map((c) => String.fromCodePoint(c.codePointAt(0)! + 0xfee0)).join('');
      const twins = [
        `${userName}\u200b`,
        `\ufeff${userName}`,
        `${local.slice(0, 3)}\u00ad${local.slice(3)}@${domain}`,
        `${fullwidth}@${domain}`,
      ];
      for (const twin of twins) {
        assertScimError(await dir.post('/Users', userBody(twin)), 409, 'uniqueness');
        const other = await create();
        assertScimError(
          await dir.patch(`/Users/${other.id}`, [{ op: 'replace', path: 'userName', value: twin }]),
          409,
          'uniqueness',
        );
      }
      // Stored in its canonical form; one that is nothing but invisible code points is empty.
      const fresh = unique('plain');
      const created = await create(`\u200b${fresh.toUpperCase().replace('@', '\u00ad@')}`);
      assert.equal(created.userName, fresh.toUpperCase());
      assertScimError(await dir.post('/Users', userBody('\u200b\u2060')), 400, 'invalidValue');
      // No-break space is white space under NFKC: the white-space rule applies.
      assertScimError(await dir.post('/Users', userBody(`${unique('nbsp')}\u00a0`)), 400, 'invalidValue');
      assert.equal(((await dir.get(`/Users/${first.id}`).expect(200)).body as ScimUser).userName, userName);
    });

    test('lists filter by userName, externalId and id (with and, or, not), page by startIndex and count', async () => {
      const tag = `page-${randomUUID().slice(0, 8)}`;
      const users: ScimUser[] = [];
      for (let i = 1; i <= 5; i++) {
        users.push(
          await create(`${tag}-${i}@example.com`, {
            externalId: `ext-${tag}-${i}`,
            displayName: `Pager ${i}`,
            emails: [{ value: `${tag}-${i}@mail.example`, type: 'work' }],
          }),
        );
      }
      const list = async (query: string) => {
        const res = await dir.get(`/Users?${query}`);
        assert.equal(res.status, 200, res.text);
        assert.equal(res.headers['content-type'], SCIM_JSON);
        const body = res.body as ListResponse<ScimUser>;
        assert.deepEqual(body.schemas, ['urn:ietf:params:scim:api:messages:2.0:ListResponse']);
        assert.equal(body.itemsPerPage, body.Resources.length);
        return body;
      };
      const filter = (f: string, more = '') => list(`filter=${encodeURIComponent(f)}${more}`);
      const ids = (body: ListResponse<ScimUser>) => body.Resources.map((u) => u.id);
      const prefix = `userName sw "${tag}"`;

      assert.deepEqual(
        ids(await filter(prefix)),
        users.map((u) => u.id),
      );
      const page = await filter(prefix, '&startIndex=2&count=2');
      assert.deepEqual([page.totalResults, page.startIndex, page.itemsPerPage], [5, 2, 2]);
      assert.deepEqual(ids(page), [users[1]!.id, users[2]!.id]);
      assert.deepEqual(ids(await filter(prefix, '&startIndex=5&count=2')), [users[4]!.id]);
      const past = await filter(prefix, '&startIndex=6');
      assert.deepEqual([past.totalResults, past.Resources.length], [5, 0]);
      // count=0 asks for the total alone; a negative count counts as 0, a startIndex below 1 as 1 (RFC 7644 §3.4.2.4).
      for (const more of ['&count=0', '&count=-3']) {
        const counted = await filter(prefix, more);
        assert.deepEqual([counted.totalResults, counted.Resources.length], [5, 0]);
      }
      assert.equal((await filter(prefix, '&startIndex=0&count=1')).startIndex, 1);
      assert.equal((await filter(prefix, '&count=5000')).itemsPerPage, 5);
      assertScimError(await dir.get('/Users?count=ten'), 400, 'invalidValue');
      assertScimError(await dir.get('/Users?startIndex=1.5'), 400, 'invalidValue');

      // userName compares without regard to case; externalId and id exactly.
      assert.deepEqual(ids(await filter(`userName eq "${tag.toUpperCase()}-3@EXAMPLE.COM"`)), [users[2]!.id]);
      assert.deepEqual(ids(await filter(`externalId eq "ext-${tag}-4"`)), [users[3]!.id]);
      assert.deepEqual(ids(await filter(`externalId eq "EXT-${tag}-4"`)), []);
      assert.deepEqual(ids(await filter(`id eq "${users[0]!.id}"`)), [users[0]!.id]);
      assert.deepEqual(ids(await filter(`userName eq "${tag}-2@example.com" and externalId eq "ext-${tag}-2"`)), [
        users[1]!.id,
      ]);
      assert.deepEqual(ids(await filter(`userName eq "${tag}-2@example.com" and externalId eq "ext-${tag}-3"`)), []);
      assert.deepEqual(ids(await filter(`${prefix} and (externalId eq "ext-${tag}-1" or id eq "${users[4]!.id}")`)), [
        users[0]!.id,
        users[4]!.id,
      ]);
      assert.equal((await filter(`${prefix} and not (externalId eq "ext-${tag}-1")`)).totalResults, 4);
      assert.deepEqual(ids(await filter(`${prefix} and displayName co "ger 3"`)), [users[2]!.id]);
      assert.deepEqual(ids(await filter(`emails.value eq "${tag}-5@MAIL.example"`)), [users[4]!.id]);
      assert.deepEqual(
        ids(await filter(`urn:ietf:params:scim:schemas:core:2.0:User:userName eq "${tag}-1@example.com"`)),
        [users[0]!.id],
      );
      assert.equal((await filter(`${prefix} and meta.created ge "${users[2]!.meta.created}"`)).totalResults, 3);
      assert.equal((await filter(`${prefix} and active eq false`)).totalResults, 0);
      const off = await dir.patch(`/Users/${users[0]!.id}`, [{ op: 'replace', path: 'active', value: false }]);
      assert.equal(off.status, 200, off.text);
      assert.deepEqual(ids(await filter(`${prefix} and active eq "False"`)), [users[0]!.id]);

      // Entra's probe: a random userName that matches nobody is an empty list, not an error.
      const probe = await filter(`userName eq "${randomUUID()}"`);
      assert.deepEqual(probe, {
        schemas: ['urn:ietf:params:scim:api:messages:2.0:ListResponse'],
        totalResults: 0,
        startIndex: 1,
        itemsPerPage: 0,
        Resources: [],
      });

      // attributes and excludedAttributes (RFC 7644 §3.9): id and schemas always come.
      const only = await filter(`id eq "${users[1]!.id}"`, '&attributes=userName,name.givenName');
      assert.deepEqual(only.Resources, [
        { schemas: [USER_SCHEMA], id: users[1]!.id, userName: `${tag}-2@example.com` },
      ]);
      const without = await filter(`id eq "${users[1]!.id}"`, '&excludedAttributes=emails,meta');
      assert.deepEqual(Object.keys(without.Resources[0]!), [
        'schemas',
        'id',
        'externalId',
        'userName',
        'displayName',
        'active',
      ]);
    });

    test('malformed, unknown and oversized filters are 400 invalidFilter, answered at once', async () => {
      const bad = [
        'userName eq',
        'userName equals "x"',
        '(userName eq "x"',
        '',
        'favouriteColour eq "red"',
        'name.givenName eq "x"',
        'active eq "maybe"',
        'userName eq 42',
        'userName gt true',
        'active co "t"',
        'emails[type eq "work"]',
        'meta.created gt "yesterday"',
        // A raw line break inside an unterminated string: scim2-parse-filter alone would backtrack for ages.
        `userName eq "x${'\n'.repeat(40)}`,
        `userName eq "${'a'.repeat(990)}"`,
        `${'not ('.repeat(9)}userName eq "x"${')'.repeat(9)}`,
        Array.from({ length: 33 }, (_, i) => `userName eq "u${i}"`).join(' or '),
      ];
      for (const filter of bad) {
        const res = await dir.get(`/Users?filter=${encodeURIComponent(filter)}`);
        assertScimError(res, 400, 'invalidFilter');
      }
      // Dates that do not exist, or that the database cannot compare, are refused the same way on both resources.
      const badDates = [
        '2024-02-30T00:00:00Z',
        '2023-02-29T00:00:00Z',
        '2024-04-31T00:00:00Z',
        '2024-01-01T24:00:00Z',
        '2024-01-01T00:60:00Z',
        '2024-13-01T00:00:00Z',
        '0000-01-01T00:00:00Z',
        '0001-01-01T00:00:00+00:01',
        '2024-01-01T00:00:00+24:00',
      ];
      for (const date of badDates) {
        for (const attribute of ['meta.created', 'meta.lastModified']) {
          for (const resource of ['/Users', '/Groups']) {
            const res = await dir.get(`${resource}?filter=${encodeURIComponent(`${attribute} gt "${date}"`)}`);
            assertScimError(res, 400, 'invalidFilter');
          }
        }
      }
      // At the edges: 32 comparisons and 8 levels are read.
      const edge = Array.from({ length: 32 }, (_, i) => `userName eq "u${i}"`).join(' or ');
      await dir.get(`/Users?filter=${encodeURIComponent(edge)}`).expect(200);
      await dir
        .get(`/Users?filter=${encodeURIComponent(`${'not ('.repeat(8)}userName eq "x"${')'.repeat(8)}`)}`)
        .expect(200);
      assertScimError(await dir.get('/Users?filter=a&filter=b'), 400, 'invalidValue');
    });

    test('dates filter by pr and by any offset: every resource has meta.created and meta.lastModified', async () => {
      await create();
      const created = await dir.post('/Groups', { schemas: [GROUP_SCHEMA], displayName: unique('dated') }).expect(201);
      for (const resource of ['/Users', '/Groups']) {
        const total = (await dir.get(`${resource}?count=0`).expect(200)).body.totalResults as number;
        assert.ok(total > 0);
        for (const filter of [
          'meta.created pr',
          'meta.lastModified pr',
          'meta.created gt "0001-01-01T23:59:00+23:59"',
        ]) {
          const res = await dir.get(`${resource}?count=0&filter=${encodeURIComponent(filter)}`);
          assert.equal(res.status, 200, `${resource} ${filter}: ${res.text}`);
          assert.equal(res.body.totalResults, total, `${resource} ${filter}`);
        }
        const none = await dir.get(`${resource}?count=0&filter=${encodeURIComponent('not (meta.created pr)')}`);
        assert.equal(none.body.totalResults, 0);
      }
      // An offset is the same instant: a minute after creation, written in UTC+14, finds nothing created later.
      const at = new Date(Date.parse(created.body.meta.created) + 60_000);
      const plus14 = new Date(at.getTime() + 14 * 3600_000).toISOString().slice(0, 19);
      const later = await dir.get(
        `/Groups?filter=${encodeURIComponent(`id eq "${created.body.id}" and meta.created gt "${plus14}+14:00"`)}`,
      );
      assert.equal(later.status, 200, later.text);
      assert.equal(later.body.totalResults, 0);
      const before = await dir.get(
        `/Groups?filter=${encodeURIComponent(`id eq "${created.body.id}" and meta.created lt "${plus14}.000000+14:00"`)}`,
      );
      assert.equal(before.body.totalResults, 1);
    });

    test('PATCH follows RFC 7644 §3.5.2: add, replace and remove, with and without path, with value filters', async () => {
      const user = await create(unique('patch'), {
        name: { givenName: 'Pat', familyName: 'Ch' },
        emails: [
          { value: 'work@patch.example', type: 'work', primary: true },
          { value: 'home@patch.example', type: 'home' },
        ],
      });
      const patch = async (operations: unknown[]) => {
        const res = await dir.patch(`/Users/${user.id}`, operations);
        assert.equal(res.status, 200, res.text);
        assert.equal(res.headers.etag, (res.body as ScimUser).meta.version);
        return res.body as ScimUser;
      };

      let now = await patch([{ op: 'add', path: 'emails[type eq "work"].value', value: 'new-work@patch.example' }]);
      assert.deepEqual(now.emails, [
        { value: 'new-work@patch.example', type: 'work', primary: true },
        { value: 'home@patch.example', type: 'home' },
      ]);
      now = await patch([{ op: 'remove', path: 'emails[type eq "home"]' }]);
      assert.deepEqual(now.emails, [{ value: 'new-work@patch.example', type: 'work', primary: true }]);
      now = await patch([{ op: 'replace', path: 'name.givenName', value: 'Patty' }]);
      assert.deepEqual(now.name, { givenName: 'Patty', familyName: 'Ch' });
      now = await patch([{ op: 'replace', value: { displayName: 'Patty Ch', externalId: `ext-${user.id}` } }]);
      assert.deepEqual([now.displayName, now.externalId], ['Patty Ch', `ext-${user.id}`]);
      now = await patch([{ op: 'add', path: 'emails', value: [{ value: 'other@patch.example', type: 'other' }] }]);
      assert.equal(now.emails!.length, 2);
      now = await patch([
        { op: 'remove', path: 'displayName' },
        { op: 'replace', path: 'emails', value: [{ value: 'only@patch.example', type: 'work', primary: 'True' }] },
        { op: 'replace', path: 'urn:ietf:params:scim:schemas:core:2.0:User:name.familyName', value: 'Chen' },
      ]);
      assert.equal(now.displayName, undefined);
      assert.deepEqual(now.emails, [{ value: 'only@patch.example', type: 'work', primary: true }]);
      assert.deepEqual(now.name, { givenName: 'Patty', familyName: 'Chen' });
      // A standard attribute this service provider does not keep is accepted and ignored (RFC 7644 §3.3).
      const before = now.meta.version;
      now = await patch([
        { op: 'add', path: 'title', value: 'Engineer' },
        { op: 'add', path: 'urn:ietf:params:scim:schemas:extension:enterprise:2.0:User:employeeNumber', value: '42' },
      ]);
      assert.equal((now as unknown as Record<string, unknown>).title, undefined);
      assert.notEqual(now.meta.version, before);

      const refused: [unknown[], number, string | undefined][] = [
        [[{ op: 'remove' }], 400, 'noTarget'],
        [[{ op: 'replace', path: 'emails[type ne "work"].value', value: 'x@y' }], 400, 'noTarget'],
        [[{ op: 'add', path: 'favouriteColour', value: 'red' }], 400, 'invalidPath'],
        [[{ op: 'add', path: '__proto__.polluted', value: 'yes' }], 400, 'invalidPath'],
        [[{ op: 'replace', value: JSON.parse('{"__proto__": {"polluted": "yes"}}') }], 400, 'invalidValue'],
        [
          [{ op: 'replace', path: 'name', value: JSON.parse('{"__proto__": {"polluted": "yes"}}') }],
          400,
          'invalidValue',
        ],
        [[{ op: 'replace', path: 'id', value: 'usr_other' }], 400, 'mutability'],
        [[{ op: 'replace', path: 'meta.created', value: '2020-01-01T00:00:00Z' }], 400, 'mutability'],
        [[{ op: 'replace', value: { id: 'usr_someone_else' } }], 400, 'mutability'],
        [[{ op: 'replace', value: { meta: { created: '2020-01-01T00:00:00Z' } } }], 400, 'mutability'],
        [[{ op: 'add', value: { displayName: 'x', Groups: [] } }], 400, 'mutability'],
        // A replace or remove whose value filter matches nothing has no target (RFC 7644 §3.5.2.2-3).
        [[{ op: 'replace', path: 'emails[type eq "home"].value', value: 'h@y' }], 400, 'noTarget'],
        [[{ op: 'replace', path: 'emails[type eq "home"]', value: { value: 'h@y' } }], 400, 'noTarget'],
        [[{ op: 'remove', path: 'emails[type eq "home"]' }], 400, 'noTarget'],
        [[{ op: 'remove', path: 'emails[value eq "nobody@y"].display' }], 400, 'noTarget'],
        [
          [
            { op: 'remove', path: 'emails[type eq "work"]' },
            { op: 'remove', path: 'emails[type eq "work"]' },
          ],
          400,
          'noTarget',
        ],
        // Path filters are held to the limits of filter=: 33 comparisons, 9 levels, 1,001 characters.
        [
          [
            {
              op: 'replace',
              path: `emails[${Array.from({ length: 33 }, (_, i) => `type eq "t${i}"`).join(' or ')}].value`,
              value: 'x',
            },
          ],
          400,
          'invalidPath',
        ],
        [
          [{ op: 'replace', path: `emails[${'not ('.repeat(9)}type eq "work"${')'.repeat(9)}].value`, value: 'x' }],
          400,
          'invalidPath',
        ],
        [[{ op: 'replace', path: `emails[value eq "${'a'.repeat(990)}"].value`, value: 'x' }], 400, 'invalidPath'],
        [[{ op: 'replace', path: 'urn:example:custom:2.0:User:shoeSize', value: '42' }], 400, 'invalidPath'],
        [[{ op: 'replace', path: 'emails[foo eq "x"].value', value: 'x' }], 400, 'invalidPath'],
        [[{ op: 'replace', path: 'name[givenName eq "x"]', value: 'x' }], 400, 'invalidPath'],
        [[{ op: 'replace', path: 'emails.value', value: 'x' }], 400, 'invalidPath'],
        [[{ op: 'replace', path: 'emails[type eq "work"', value: 'x' }], 400, 'invalidPath'],
        [[{ op: 'replace', path: 'active', value: 'maybe' }], 400, 'invalidValue'],
        [[{ op: 'replace', path: 'userName', value: 7 }], 400, 'invalidValue'],
        [[{ op: 'replace', path: 'userName', value: '' }], 400, 'invalidValue'],
        [[{ op: 'add', path: 'displayName' }], 400, 'invalidValue'],
        [[{ op: 'move', path: 'displayName', value: 'x' }], 400, 'invalidSyntax'],
        [[{ op: 'add', path: 'displayName', value: 'x', from: 'y' }], 400, 'invalidSyntax'],
        [['add'], 400, 'invalidSyntax'],
        [[], 400, 'invalidValue'],
      ];
      for (const [operations, status, scimType] of refused) {
        assertScimError(await dir.patch(`/Users/${user.id}`, operations), status, scimType);
      }
      assert.equal(({} as Record<string, unknown>).polluted, undefined);
      // At the edges: 32 comparisons and 8 levels in a path filter apply.
      const thirtyTwo = Array.from({ length: 31 }, (_, i) => `type eq "t${i}"`)
        .concat('type eq "work"')
        .join(' or ');
      now = await patch([{ op: 'replace', path: `emails[${thirtyTwo}].display`, value: 'Thirty-two' }]);
      assert.equal(now.emails![0]!.display, 'Thirty-two');
      now = await patch([{ op: 'remove', path: `emails[${'not ('.repeat(8)}type eq "work"${')'.repeat(8)}].display` }]);
      assert.equal(now.emails![0]!.display, undefined);
      const noSchemas = await server.http
        .patch(`/scim/v2/Users/${user.id}`)
        .set({ authorization: `Bearer ${SCIM_TOKEN}`, 'content-type': 'application/scim+json' })
        .send(JSON.stringify({ Operations: [{ op: 'remove', path: 'displayName' }] }));
      assertScimError(noSchemas, 400, 'invalidSyntax');
      // Nothing refused changed anything.
      const after = await dir.get(`/Users/${user.id}`).expect(200);
      assert.equal((after.body as ScimUser).meta.version, now.meta.version);
    });

    test("a PATCH's paths total at most 100,000 characters: at it they apply, one past it is 413", async () => {
      const user = await create(unique('paths'), { emails: [{ value: 'p@example.com', type: 'work' }] });
      const path = (length: number) => {
        const head = 'emails[type eq "work" or value eq "';
        const tail = '"].display';
        return `${head}${'v'.repeat(length - head.length - tail.length)}${tail}`;
      };
      // 100 operations of 1,000 characters each: exactly the limit.
      const ops = (last: number) =>
        Array.from({ length: 100 }, (_, i) => ({ op: 'replace', path: path(i === 99 ? last : 1000), value: `d${i}` }));
      const edge = await dir.patch(`/Users/${user.id}`, ops(1000));
      assert.equal(edge.status, 200, edge.text);
      assert.equal((edge.body as ScimUser).emails![0]!.display, 'd99');
      const past = await dir.patch(`/Users/${user.id}`, [...ops(1000), { op: 'replace', path: 'x', value: 'y' }]);
      assertScimError(past, 413);
      // 8 directories at once at the limit: each applies or waits its turn, none fails.
      const busy = await Promise.all(Array.from({ length: 8 }, () => dir.patch(`/Users/${user.id}`, ops(1000))));
      assert.deepEqual([...new Set(busy.map((r) => r.status))], [200]);
    });

    test('what the HTTP server answers by itself under /scim is a SCIM error: 431 for headers too large, 408 for a stalled body', async () => {
      const padded = (path: string) =>
        fetch(`${server.url}${path}`, {
          headers: { authorization: `Bearer ${SCIM_TOKEN}`, 'x-padding': 'x'.repeat(20 * 1024) },
        });
      const big = await padded('/scim/v2/Users');
      assert.equal(big.status, 431);
      assert.equal(big.headers.get('content-type'), SCIM_JSON);
      const bigBody = JSON.parse(await big.text()) as { schemas: string[]; status: string; detail: string };
      assert.deepEqual(bigBody.schemas, [ERROR_SCHEMA]);
      assert.equal(bigBody.status, '431');
      assert.match(bigBody.detail, /exceed/);
      // Elsewhere it stays problem details.
      const rest = await padded('/v1/orders');
      assert.equal(rest.status, 431);
      assert.equal(rest.headers.get('content-type'), 'application/problem+json');

      // Half a body, then nothing: after BODY_IDLE_TIMEOUT_S the answer is 408, as a SCIM error, and the connection ends.
      const { hostname, port } = new URL(server.url);
      const socket = connect(Number(port), hostname);
      const answer = new Promise<string>((resolve) => {
        let text = '';
        socket.on('data', (chunk: Buffer) => (text += chunk.toString('utf8')));
        socket.on('close', () => resolve(text));
        socket.on('error', () => undefined);
      });
      socket.write(
        [
          'POST /scim/v2/Users HTTP/1.1',
          `Host: ${hostname}:${port}`,
          `Authorization: Bearer ${SCIM_TOKEN}`,
          'Content-Type: application/scim+json',
          'Content-Length: 100',
          '',
          '{"schemas":',
        ].join('\r\n'),
      );
      const raw = await answer;
      const [head, body] = raw.split('\r\n\r\n') as [string, string];
      assert.match(head, /^HTTP\/1\.1 408 /);
      assert.match(head, /\r\nContent-Type: application\/scim\+json; charset=utf-8\r\n/i);
      const timedOut = JSON.parse(body) as { schemas: string[]; status: string; detail: string };
      assert.deepEqual(timedOut.schemas, [ERROR_SCHEMA]);
      assert.equal(timedOut.status, '408');
    });

    test("a PATCH's value filters make at most 500,000 comparisons against a group's members: at it they apply, one past it is 400 tooMany, refused before any of it runs; Okta's exact removals are not counted", async () => {
      const users: ScimUser[] = [];
      for (let batch = 0; batch < 10; batch++)
        users.push(...(await Promise.all(Array.from({ length: 25 }, () => create()))));
      const group = await dir.post('/Groups', {
        schemas: [GROUP_SCHEMA],
        displayName: unique('big-group'),
        members: users.map((u) => ({ value: u.id })),
      });
      assert.equal(group.status, 201, group.text);
      const id = (group.body as { id: string }).id;
      // 20 comparisons against 250 members is 5,000 an operation: 100 of them are the bound exactly.
      const filterOf = (user: ScimUser, comparisons: number) =>
        [...Array.from({ length: comparisons - 1 }, (_, i) => `value eq "nobody-${i}"`), `value eq "${user.id}"`].join(
          ' or ',
        );
      const ops = (n: number) =>
        Array.from({ length: n }, (_, i) => ({
          op: 'replace',
          path: `members[${filterOf(users[i]!, 20)}]`,
          value: { value: users[i]!.id },
        }));
      const edge = await dir.patch(`/Groups/${id}`, ops(100));
      assert.equal(edge.status, 200, edge.text);
      assert.equal((edge.body as ScimGroup).members!.length, 250);
      const version = (edge.body as ScimGroup).meta.version;

      // One comparison more: refused, counted before any operation runs, so nothing of it is applied.
      const past = await dir.patch(`/Groups/${id}`, [
        ...ops(100),
        { op: 'replace', path: `members[${filterOf(users[0]!, 1)}]`, value: { value: users[0]!.id } },
      ]);
      const refused = assertScimError(past, 400, 'tooMany');
      assert.match(refused.detail, /at most 500000 comparisons .*these could make 500250\./);
      // The issue's shape (a thousand add operations of filters that match nothing) is refused the same way, and
      // /healthz, asked at the same time, is answered.
      const adds = Array.from({ length: 1000 }, (_, i) => ({
        op: 'add',
        path: `members[${Array.from({ length: 5 }, (_, j) => `value co "!${j}"`).join(' or ')}]`,
        value: { value: users[i % 250]!.id },
      }));
      const [flood, healthz] = await Promise.all([dir.patch(`/Groups/${id}`, adds), server.http.get('/healthz')]);
      assertScimError(flood, 400, 'tooMany');
      assert.equal(healthz.status, 200);
      assert.equal(((await dir.get(`/Groups/${id}`).expect(200)).body as ScimGroup).meta.version, version);

      // Okta's removals by exact value are a plain scan, not counted: with the bound's worth of filters before them,
      // they take every member out.
      const removals = users.map((u) => ({ op: 'remove', path: `members[value eq "${u.id}"]` }));
      const emptied = await dir.patch(`/Groups/${id}`, [...ops(100), ...removals]);
      assert.equal(emptied.status, 200, emptied.text);
      assert.deepEqual((emptied.body as ScimGroup).members, []);
      assertScimError(await dir.patch(`/Groups/${id}`, removals.slice(0, 1)), 400, 'noTarget');
    });

    test('a PATCH carries at most 1,000 operations: 1,000 apply, 1,001 and 10,000 are 413', async () => {
      const user = await create();
      const ops = (n: number) =>
        Array.from({ length: n }, (_, i) => ({ op: 'replace', path: 'displayName', value: `n${i}` }));
      const edge = await dir.patch(`/Users/${user.id}`, ops(1000));
      assert.equal(edge.status, 200, edge.text);
      assert.equal((edge.body as ScimUser).displayName, 'n999');
      assertScimError(await dir.patch(`/Users/${user.id}`, ops(1001)), 413);
      const huge = await dir.patch(`/Users/${user.id}`, ops(10_000));
      assertScimError(huge, 413);
    });

    test('Entra: capitalised ops, string booleans, the enterprise extension and its userName probe', async () => {
      const userName = unique('entra');
      const objectId = randomUUID();
      const created = await dir.post('/Users', {
        schemas: [USER_SCHEMA, 'urn:ietf:params:scim:schemas:extension:enterprise:2.0:User'],
        externalId: objectId,
        userName,
        active: 'True',
        displayName: 'Entra Person',
        title: 'Engineer',
        preferredLanguage: 'en-GB',
        emails: [{ primary: true, type: 'work', value: userName }],
        name: { formatted: 'Entra Person', familyName: 'Person', givenName: 'Entra' },
        'urn:ietf:params:scim:schemas:extension:enterprise:2.0:User': { employeeNumber: '7', department: 'Ops' },
      });
      assert.equal(created.status, 201, created.text);
      const user = created.body as ScimUser;
      assert.equal(user.active, true);
      assert.equal((user as unknown as Record<string, unknown>).title, undefined);

      const probe = await dir.get(`/Users?filter=${encodeURIComponent(`userName eq "${randomUUID()}"`)}`).expect(200);
      assert.equal(probe.body.totalResults, 0);
      const found = await dir.get(`/Users?filter=${encodeURIComponent(`externalId eq "${objectId}"`)}`).expect(200);
      assert.deepEqual(
        (found.body as ListResponse<ScimUser>).Resources.map((u) => u.id),
        [user.id],
      );

      const off = await dir.patch(`/Users/${user.id}`, [{ op: 'Replace', path: 'active', value: 'False' }]);
      assert.equal(off.status, 200, off.text);
      assert.equal((off.body as ScimUser).active, false);
      const on = await dir.patch(`/Users/${user.id}`, [
        { op: 'Replace', value: { active: 'TRUE', displayName: 'Renamed' } },
        { op: 'Add', path: 'emails[type eq "work"].value', value: 'moved@example.com' },
        { op: 'Add', path: 'urn:ietf:params:scim:schemas:extension:enterprise:2.0:User:manager', value: 'x' },
      ]);
      assert.equal(on.status, 200, on.text);
      assert.deepEqual(
        [(on.body as ScimUser).active, (on.body as ScimUser).displayName, (on.body as ScimUser).emails],
        [true, 'Renamed', [{ primary: true, type: 'work', value: 'moved@example.com' }]],
      );
    });

    test('Okta: PUT for every change (active included), DELETE with an empty body and a scim+json content type', async () => {
      const user = await create(unique('okta'), { externalId: `okta-${randomUUID()}` });
      const full = (await dir.get(`/Users/${user.id}`).expect(200)).body as ScimUser;
      // Okta sends back what it read, meta and all, with its changes.
      const put = await dir.put(`/Users/${user.id}`, {
        ...full,
        active: false,
        displayName: 'Okta Person',
        groups: [],
      });
      assert.equal(put.status, 200, put.text);
      assert.deepEqual([(put.body as ScimUser).active, (put.body as ScimUser).displayName], [false, 'Okta Person']);
      // A PUT that leaves `active` out keeps it: it never reactivates anyone by accident.
      const kept = await dir.put(
        `/Users/${user.id}`,
        userBody(user.userName, { active: undefined, externalId: user.externalId }),
      );
      assert.equal((kept.body as ScimUser).active, false);
      assertScimError(
        await dir.put(`/Users/${user.id}`, { ...full, id: 'usr_0000000000000000000000000a' }),
        400,
        'mutability',
      );

      const deleted = await server.http
        .delete(`/scim/v2/Users/${user.id}`)
        .set({ authorization: `Bearer ${SCIM_TOKEN}`, 'content-type': 'application/scim+json', 'content-length': '0' });
      assert.equal(deleted.status, 204);
      assertScimError(await dir.get(`/Users/${user.id}`), 404);
    });

    test('bodies that are not a User are SCIM errors: syntax, media type, size (at 512 kB and one past), attributes', async () => {
      const raw = (body: string, type = 'application/scim+json') =>
        server.http
          .post('/scim/v2/Users')
          .set({ authorization: `Bearer ${SCIM_TOKEN}`, 'content-type': type })
          .send(body);
      assertScimError(await raw('{'), 400, 'invalidSyntax');
      assertScimError(await raw('[]'), 400, 'invalidSyntax');
      assertScimError(await raw('"user"'), 400, 'invalidSyntax');
      assertScimError(await raw(''), 400, 'invalidSyntax');
      assertScimError(await raw(JSON.stringify(userBody(unique('t'))), 'text/plain'), 415);
      assertScimError(await raw(JSON.stringify(userBody(unique('t'))), 'application/scim+json; charset=utf-16'), 415);
      // Bytes that are not UTF-8 (a UTF-16 byte order mark here) are 415 too, never stored as U+FFFD.
      const latin = Buffer.concat([
        Buffer.from('{"schemas":["' + USER_SCHEMA + '"],"userName":"'),
        Buffer.from([0xff, 0xfe]),
        Buffer.from('x"}'),
      ]);
      const notUtf8 = await fetch(`${server.url}/scim/v2/Users`, {
        method: 'POST',
        headers: { authorization: `Bearer ${SCIM_TOKEN}`, 'content-type': 'application/scim+json' },
        body: latin,
      });
      assert.equal(notUtf8.status, 415);
      assert.equal(notUtf8.headers.get('content-type'), SCIM_JSON);
      assert.equal(((await notUtf8.json()) as { status: string }).status, '415');
      const stored = await dir.get(`/Users?filter=${encodeURIComponent('userName co "\uFFFD"')}`).expect(200);
      assert.equal(stored.body.totalResults, 0);
      // application/json is accepted as well as application/scim+json.
      await raw(JSON.stringify(userBody(unique('json'))), 'application/json').expect(201);

      const limit = 512 * 1024;
      const padded = (bytes: number) => {
        const body = JSON.stringify(userBody(unique('big')));
        return body.slice(0, -1) + ' '.repeat(bytes - Buffer.byteLength(body)) + '}';
      };
      const atLimit = await raw(padded(limit));
      assert.equal(atLimit.status, 201, atLimit.text);
      assertScimError(await raw(padded(limit + 1)), 413);
      assertScimError(await raw(padded(1024 * 1024)), 413);

      const refused: [Record<string, unknown>, number, string][] = [
        [userBody(unique('u'), { favouriteColour: 'red' }), 400, 'invalidValue'],
        [userBody(unique('u'), { name: { nickname: 'x' } }), 400, 'invalidValue'],
        [{ userName: unique('u') }, 400, 'invalidSyntax'],
        [{ schemas: [GROUP_SCHEMA], userName: unique('u') }, 400, 'invalidSyntax'],
        [userBody(unique('u'), { schemas: [USER_SCHEMA, 'urn:example:custom:2.0:User'] }), 400, 'invalidValue'],
        [{ schemas: [USER_SCHEMA] }, 400, 'invalidValue'],
        [userBody(''), 400, 'invalidValue'],
        [userBody('   '), 400, 'invalidValue'],
        [userBody(42 as unknown as string), 400, 'invalidValue'],
        [userBody('x'.repeat(257)), 400, 'invalidValue'],
        [userBody(unique('u'), { active: 'maybe' }), 400, 'invalidValue'],
        [userBody(unique('u'), { emails: { value: 'a@b' } }), 400, 'invalidValue'],
        [userBody(unique('u'), { emails: [{ type: 'work' }] }), 400, 'invalidValue'],
        [
          userBody(unique('u'), {
            emails: [
              { value: 'a@b', primary: true },
              { value: 'c@d', primary: 'true' },
            ],
          }),
          400,
          'invalidValue',
        ],
        [
          userBody(unique('u'), { emails: Array.from({ length: 21 }, (_, i) => ({ value: `${i}@b` })) }),
          400,
          'invalidValue',
        ],
        [userBody(unique('u'), { userName: 'dup', USERNAME: 'dup2' }), 400, 'invalidValue'],
        [userBody('nul\u0000byte'), 400, 'invalidValue'],
        [userBody(unique('u'), { name: { givenName: 'a\u0000' } }), 400, 'invalidValue'],
      ];
      for (const [body, status, scimType] of refused) assertScimError(await dir.post('/Users', body), status, scimType);
      // At the edges: 256 characters, 20 emails.
      await dir.post('/Users', userBody(`${randomUUID()}${'x'.repeat(220)}`)).expect(201);
      await dir
        .post(
          '/Users',
          userBody(unique('many'), { emails: Array.from({ length: 20 }, (_, i) => ({ value: `${i}@b` })) }),
        )
        .expect(201);
      const notAllowed = await dir.post('/Users/usr_0000000000000000000000000a', userBody(unique('u')));
      assertScimError(notAllowed, 405);
      assert.equal(notAllowed.headers.allow, 'GET, HEAD, PUT, PATCH, DELETE');
      const allowed: [string, string][] = [
        ['/Users', 'GET, HEAD, POST'],
        ['/Groups/', 'GET, HEAD, POST'],
        ['/Groups/grp_0000000000000000000000000a', 'GET, HEAD, PUT, PATCH, DELETE'],
        ['/ServiceProviderConfig', 'GET, HEAD'],
        ['/Schemas', 'GET, HEAD'],
        ['/ResourceTypes/User', 'GET, HEAD'],
      ];
      for (const [path, allow] of allowed) {
        const method = path.startsWith('/Users') || path === '/Groups/' ? 'delete' : 'post';
        const res = method === 'delete' ? await dir.delete(path) : await dir.post(path, {});
        assertScimError(res, 405);
        assert.equal(res.headers.allow, allow, path);
      }
      assertScimError(await dir.delete('/ServiceProviderConfig/x'), 404);
      // White space around a userName is refused: Okta and Entra send it trimmed, and it would make a twin.
      for (const userName of [' lead@example.com', 'trail@example.com ', 'tab@example.com\t']) {
        assertScimError(await dir.post('/Users', userBody(userName)), 400, 'invalidValue');
      }
    });

    test('groups carry members: Entra and Okta membership PATCHes, displayName filter, members left out on request', async () => {
      const [u1, u2, u3] = [await create(), await create(), await create()];
      const name = `team-${randomUUID().slice(0, 8)}`;
      const created = await dir.post('/Groups', {
        schemas: [GROUP_SCHEMA],
        displayName: name,
        externalId: `grp-${name}`,
        members: [{ value: u1.id, display: 'ignored' }],
      });
      assert.equal(created.status, 201, created.text);
      const group = created.body as ScimGroup;
      assert.match(group.id, /^grp_[0-9a-z]{26}$/);
      assert.equal(created.headers.location, `${server.running.publicUrl}/scim/v2/Groups/${group.id}`);
      assert.deepEqual(group.members, [
        {
          value: u1.id,
          display: u1.userName,
          type: 'User',
          $ref: `${server.running.publicUrl}/scim/v2/Users/${u1.id}`,
        },
      ]);
      const membersOf = async () =>
        ((await dir.get(`/Groups/${group.id}`).expect(200)).body as ScimGroup).members?.map((m) => m.value).sort() ??
        [];

      const byName = await dir.get(
        `/Groups?filter=${encodeURIComponent(`displayName eq "${name.toUpperCase()}"`)}&excludedAttributes=members`,
      );
      assert.equal(byName.status, 200);
      assert.deepEqual(
        (byName.body as ListResponse<ScimGroup>).Resources.map((g) => [g.id, g.displayName, g.members]),
        [[group.id, name, undefined]],
      );
      const bare = await dir.get(`/Groups/${group.id}?excludedAttributes=members`).expect(200);
      assert.equal((bare.body as ScimGroup).members, undefined);
      const byMember = await dir.get(`/Groups?filter=${encodeURIComponent(`members.value eq "${u1.id}"`)}`).expect(200);
      assert.deepEqual(
        (byMember.body as ListResponse<ScimGroup>).Resources.map((g) => g.id),
        [group.id],
      );

      // Entra adds and removes members in batches, with capitalised ops.
      await dir
        .patch(`/Groups/${group.id}`, [{ op: 'Add', path: 'members', value: [{ value: u2.id }, { value: u3.id }] }])
        .expect(200);
      assert.deepEqual(await membersOf(), [u1.id, u2.id, u3.id].sort());
      await dir
        .patch(`/Groups/${group.id}`, [{ op: 'Remove', path: 'members', value: [{ value: u3.id }] }])
        .expect(200);
      assert.deepEqual(await membersOf(), [u1.id, u2.id].sort());
      // Okta removes one member by a value filter, and renames with a pathless replace that repeats the id.
      await dir.patch(`/Groups/${group.id}`, [{ op: 'remove', path: `members[value eq "${u2.id}"]` }]).expect(200);
      assert.deepEqual(await membersOf(), [u1.id]);
      const renamed = await dir.patch(`/Groups/${group.id}`, [
        { op: 'replace', value: { id: group.id, displayName: `${name}-renamed` } },
      ]);
      assert.equal((renamed.body as ScimGroup).displayName, `${name}-renamed`);
      // PUT replaces the whole membership.
      const put = await dir.put(`/Groups/${group.id}`, {
        schemas: [GROUP_SCHEMA],
        displayName: name,
        members: [{ value: u3.id }],
      });
      assert.deepEqual(
        (put.body as ScimGroup).members!.map((m) => m.value),
        [u3.id],
      );

      const other = await dir.post('/Groups', { schemas: [GROUP_SCHEMA], displayName: `${name}-other` }).expect(201);
      assertScimError(
        await dir.post('/Groups', { schemas: [GROUP_SCHEMA], displayName: name.toUpperCase() }),
        409,
        'uniqueness',
      );
      assertScimError(
        await dir.put(`/Groups/${other.body.id}`, { schemas: [GROUP_SCHEMA], displayName: name }),
        409,
        'uniqueness',
      );
      assertScimError(
        await dir.patch(`/Groups/${group.id}`, [
          { op: 'add', path: 'members', value: [{ value: 'usr_0000000000000000000000000a' }] },
        ]),
        400,
        'invalidValue',
      );
      assertScimError(
        await dir.patch(`/Groups/${group.id}`, [
          { op: 'add', path: 'members', value: [{ value: other.body.id, type: 'Group' }] },
        ]),
        400,
        'invalidValue',
      );
      assertScimError(await dir.post('/Groups', { schemas: [GROUP_SCHEMA] }), 400, 'invalidValue');
      assertScimError(
        await dir.post('/Groups', { schemas: [GROUP_SCHEMA], displayName: 'x', owner: 'y' }),
        400,
        'invalidValue',
      );

      // A deleted user leaves every group, and the group's version moves on.
      const before = ((await dir.get(`/Groups/${group.id}`).expect(200)).body as ScimGroup).meta.version;
      await dir.delete(`/Users/${u3.id}`).expect(204);
      const after = (await dir.get(`/Groups/${group.id}`).expect(200)).body as ScimGroup;
      assert.deepEqual(after.members, []);
      assert.notEqual(after.meta.version, before);

      await dir.delete(`/Groups/${group.id}`).expect(204);
      assertScimError(await dir.get(`/Groups/${group.id}`), 404);

      // Directory writes take turns: 20 PATCHes adding one member each, at once, lose none.
      const crowd = await dir.post('/Groups', { schemas: [GROUP_SCHEMA], displayName: `${name}-crowd` }).expect(201);
      const joining = await Promise.all(Array.from({ length: 20 }, () => create()));
      const added = await Promise.all(
        joining.map((u) =>
          dir.patch(`/Groups/${crowd.body.id}`, [{ op: 'add', path: 'members', value: [{ value: u.id }] }]),
        ),
      );
      assert.deepEqual(
        added.map((a) => a.status),
        Array(20).fill(200),
      );
      const crowded = (await dir.get(`/Groups/${crowd.body.id}`).expect(200)).body as ScimGroup;
      assert.deepEqual(crowded.members!.map((m) => m.value).sort(), joining.map((u) => u.id).sort());
      assert.equal(crowded.meta.version, `"${crowd.body.id}.v21"`);
    });

    test("failed attempts spend the address's SCIM budget: the 50th is 401, the 51st 429, while the directory's own token goes on", async () => {
      const ip = ipOf();
      const wrong = (n: number) => directory(server.url, { token: `wrong${n}`, ip });
      for (let i = 0; i < 49; i++) assertScimError(await wrong(i).get('/Users'), 401);
      const user = await create();
      // The directory's credential from the same address, between the failures and after them, is never refused.
      await directory(server.url, { ip }).get('/Users?count=0').expect(200);
      assertScimError(await wrong(49).get('/Users'), 401);
      const refused = await wrong(50).get('/Users');
      assertScimError(refused, 429);
      assert.match(refused.headers['retry-after']!, /^\d+$/);
      assert.match(refused.headers['ratelimit']!, /^"orders";r=0;t=\d+$/);
      // The guesser stays stopped, whatever it sends: no credential, a malformed one, a person's token.
      assertScimError(await server.http.get('/scim/v2/Users').set('x-forwarded-for', ip), 429);
      const from = directory(server.url, { ip });
      await from.get('/Users?count=0').expect(200);
      const patched = await from.patch(`/Users/${user.id}`, [{ op: 'replace', path: 'displayName', value: 'Still' }]);
      assert.equal(patched.status, 200, patched.text);
      // Another address is not affected.
      assertScimError(await wrong(51).get('/Users').set('x-forwarded-for', ipOf()), 401);

      // 60 at once from one address: exactly 50 are let through to fail, the rest are 429.
      const busy = directory(server.url, { token: 'still-not-the-secret', ip: ipOf() });
      const answers = await Promise.all(Array.from({ length: 60 }, () => busy.get('/Users')));
      assert.deepEqual(answers.map((a) => a.status).sort(), [...Array(50).fill(401), ...Array(10).fill(429)]);
    });

    test("a person's valid token without the scim scope spends that person's budget, not the directory's address's", async () => {
      const ip = ipOf();
      const bob = directory(server.url, { token: await server.token('bob'), ip });
      for (let i = 0; i < 50; i++) assertScimError(await bob.get('/Users'), 403, undefined);
      assertScimError(await bob.get('/Users'), 429);
      // From another address too: the budget is bob's.
      assertScimError(await bob.get('/Users').set('x-forwarded-for', ipOf()), 429);
      // The address has spent nothing: a wrong credential from it is still a plain 401, and the directory is answered.
      assertScimError(await directory(server.url, { token: 'wrong', ip }).get('/Users'), 401);
      await directory(server.url, { ip }).get('/Users?count=0').expect(200);
    });

    test("anonymous sign-in starts from the directory's address do not lock the directory out: SCIM has its own budget", async () => {
      const ip = ipOf();
      const user = await create();
      // 500 sign-in starts, 25 at a time, spend the address's whole budget (5,000 points, 10 each).
      const starts: number[] = [];
      for (let round = 0; round < 20; round++) {
        const answers = await Promise.all(
          Array.from({ length: 25 }, () =>
            request(server.running.publicUrl).get('/auth/login').set('x-forwarded-for', ip),
          ),
        );
        starts.push(...answers.map((a) => a.status));
      }
      assert.deepEqual([...new Set(starts)], [302]);
      assert.equal((await request(server.running.publicUrl).get('/auth/login').set('x-forwarded-for', ip)).status, 429);
      // The directory, from the same address, with its credential: answered, 16 at once.
      const from = directory(server.url, { ip });
      const reads = await Promise.all(Array.from({ length: 16 }, () => from.get('/Users?count=0')));
      assert.deepEqual([...new Set(reads.map((r) => r.status))], [200]);
      const patched = await from.patch(`/Users/${user.id}`, [{ op: 'replace', path: 'displayName', value: 'Still' }]);
      assert.equal(patched.status, 200, patched.text);
    });
  });
});

// ─── was __tests__/integration/scim-deactivation.test.ts ───
describe('scim-deactivation', () => {
  /** The issue's bound: a deactivation takes effect on every replica within a second. */
  const BOUND_MS = 1_000;
  const DEACTIVATED = 'Bearer realm="orders-api", error="invalid_token", error_description="account deactivated"';
  const ORDERS = '{ recentOrders(first: 5) { id } }';

  /**
   * Replica A takes the directory's writes, B is where the person is: two app instances over one database (with
   * Redis when the run has it, else the database poll is the only path between them), or, on the embedded defaults,
   * also one instance playing both parts.
   */
  const topologies: [string, number][] = process.env.DATABASE_URL
    ? [['two replicas on PostgreSQL and Redis', 2]]
    : [
        ['one replica on the embedded defaults', 1],
        ['two replicas on the embedded database, without Redis', 2],
      ];

  const iatOf = (token: string) =>
    (JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString()) as { iat: number }).iat;

  /** Resolves once a second has begun after the token's `iat`: the deny list compares whole seconds. */
  async function secondAfter(token: string): Promise<void> {
    const wait = (iatOf(token) + 1) * 1000 - Date.now();
    if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
  }

  /** How often the stall monitor ticks. */
  const STALL_RESOLUTION_MS = 10;

  /**
   * The issue's bound, checked robustly: every replica and the test share this process's event loop, so on a starved
   * machine a stall delays the effect and its observation alike. A window measures from the write's answer to the
   * effect, and its check subtracts every stall of the process meanwhile (monitorEventLoopDelay, summed); the effect
   * itself is waited for (pushed, so waited on, not polled) up to ten times the bound.
   */
  function boundWindow(what: string) {
    const start = performance.now();
    const stalls = monitorEventLoopDelay({ resolution: STALL_RESOLUTION_MS });
    stalls.enable();
    return {
      effect: <T>(promise: Promise<T>) => within(10 * BOUND_MS, what, promise),
      check() {
        stalls.disable();
        const elapsed = performance.now() - start;
        // Every tick records its whole interval: what each took past the resolution is time the process stood still.
        const ticks = stalls.count;
        const stalled = ticks ? Math.max(0, (stalls.mean * ticks) / 1e6 - ticks * STALL_RESOLUTION_MS) : 0;
        assert.ok(
          elapsed - stalled <= BOUND_MS,
          `${what}: ${elapsed.toFixed(0)} ms after the write, of which this process stood still ${stalled.toFixed(0)} ms`,
        );
      },
    };
  }

  /** Repeats `probe` until it answers `status`; fails once `ms` have passed. For effects that have no event. */
  async function until(status: number, ms: number, probe: () => Promise<{ status: number }>) {
    const deadline = Date.now() + ms;
    for (;;) {
      const res = await probe();
      if (res.status === status) return res;
      if (Date.now() > deadline) assert.fail(`still ${res.status} after ${ms} ms, expected ${status}`);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }

  describe.each(topologies)('a directory deactivation on %s', (_name, replicas) => {
    let a: TestServer;
    let b: TestServer;
    let dir: Directory;
    let issuer: string;

    beforeAll(async () => {
      // Webhooks go to receivers on loopback here.
      const env = { SCIM_TOKEN, WEBHOOK_ALLOW_PRIVATE_URLS: 'true', WEBHOOK_POLL_MS: '100' };
      a = await startTestServer(env, { replicated: true });
      b =
        replicas === 2
          ? await startTestServer({ ...env, OIDC_ISSUER: a.running.app.issuer }, { sameDatabaseAs: a })
          : a;
      dir = directory(a.url);
      issuer = a.running.app.issuer;
    });
    afterAll(async () => {
      if (b !== a) await b?.close();
      await a?.close();
      await Promise.all(receivers.map((r) => r.close()));
    });
    const receivers: WebhookReceiver[] = [];

    const freshToken = async (user: string) =>
      (await loginWithPkce({ issuer, username: user, password: user })).accessToken;
    const rest = (token: string, path = '/v1/orders') =>
      request(b.url).get(path).set('authorization', `Bearer ${token}`);
    const graphql = (token: string) =>
      request(b.url)
        .post('/graphql')
        .set({ authorization: `Bearer ${token}`, 'content-type': 'application/json' })
        .send({ query: ORDERS });
    const sse = (token: string) =>
      request(b.url)
        .post('/graphql/stream')
        .set({ authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'text/event-stream' })
        .send({ query: ORDER_CREATED });
    const provision = async (subject: string) => {
      const res = await dir.post(
        '/Users',
        userBody(`${subject}@example.com`, { externalId: subject, displayName: subject }),
      );
      assert.equal(res.status, 201, res.text);
      return res.body as { id: string };
    };
    /** The directory user linked to this subject, active (whatever an earlier test left it as). */
    const active = async (subject: string) => {
      const found = await dir.get(`/Users?filter=${encodeURIComponent(`externalId eq "${subject}"`)}`).expect(200);
      const user = found.body.Resources[0] as { id: string };
      await dir.patch(`/Users/${user.id}`, [{ op: 'replace', path: 'active', value: true }]).expect(200);
      return user;
    };
    /** Each probe on B answers its status, within the bound after the directory's write just answered. */
    const reaches = async (what: string, ...probes: [number, () => Promise<{ status: number }>][]) => {
      const window = boundWindow(`${what} reaching B`);
      for (const [status, probe] of probes) await until(status, 10 * BOUND_MS, probe);
      window.check();
    };
    const sessionCookie = async (user: string) => {
      const browser = new WebClient();
      const { response } = await signIn(browser, a.running.publicUrl, user);
      assert.equal(response.status, 303);
      return `orders_session=${browser.cookie(a.running.publicUrl, 'orders_session')!}`;
    };

    test('her token, session and streams end on every replica within 1 s; reactivation and a fresh token restore her; bob is unaffected', async () => {
      const alice = await provision('alice');
      const token = await freshToken('alice');
      const bob = await freshToken('bob');
      const cookie = await sessionCookie('alice');

      // She signs in and reads her orders, over REST, GraphQL and with her browser session.
      await rest(token).expect(200);
      assert.ok((await graphql(token).expect(200)).body.data.recentOrders);
      await request(b.url).get('/auth/session').set('cookie', cookie).expect(200);

      // She holds a WebSocket and an SSE subscription (and her browser a WebSocket); bob holds one too.
      const listening = Promise.all([
        b.nextSubscription(),
        b.nextSubscription(),
        b.nextSubscription(),
        b.nextSubscription(),
      ]);
      const ws = subscriber(b.url, token);
      const wsSubscription = ws.subscribe(ORDER_CREATED);
      const stream = await sseStream(b.url, { authorization: `Bearer ${token}` });
      assert.equal(stream.res.status, 200);
      const browserSocket = cookieClient(b.url, cookie);
      await browserSocket.connected;
      browserSocket.client.subscribe(
        { query: ORDER_CREATED },
        { next: () => undefined, error: () => undefined, complete: () => undefined },
      );
      const bobs = subscriber(b.url, bob);
      const bobsOrders = bobs.subscribe(ORDER_CREATED);
      await listening;

      // Tokens issued before the deactivation stay refused after a reactivation, counted in whole seconds of `iat`.
      await secondAfter(token);
      const deactivated = await dir.patch(`/Users/${alice.id}`, [{ op: 'Replace', path: 'active', value: 'False' }]);
      assert.equal(deactivated.status, 200);
      const window = boundWindow('her streams on B ending');

      // Her streams on B end: pushed to B, so they are waited on, not polled, and the bound is checked.
      const closed = await window.effect(ws.closed());
      assert.deepEqual(closed, { code: 4403, reason: 'account deactivated' });
      const browserClosed = await window.effect(browserSocket.closed);
      // The session behind it was revoked in the same transaction: whichever B notices first (the directory's change or
      // its check of the sessions behind open streams) closes it, with its own reason.
      assert.equal(browserClosed.code, 4403);
      assert.match(browserClosed.reason, /^(account deactivated|The session has ended)/);
      assert.match(await window.effect(stream.text), /: closed: account deactivated\n\n$/);
      await wsSubscription.done;
      window.check();

      // B has heard of it, so every transport refuses her token now.
      const refusedRest = await rest(token).expect(401);
      assert.equal(refusedRest.headers['www-authenticate'], DEACTIVATED);
      assert.equal(refusedRest.headers['content-type'], 'application/problem+json; charset=utf-8');
      assert.equal(refusedRest.body.code, 'UNAUTHENTICATED');
      const refusedGraphql = await graphql(token).expect(401);
      assert.equal(refusedGraphql.headers['www-authenticate'], DEACTIVATED);
      assert.equal(refusedGraphql.body.errors[0].extensions.code, 'UNAUTHENTICATED');
      const refusedSse = await sse(token).expect(401);
      assert.equal(refusedSse.headers['www-authenticate'], DEACTIVATED);
      const socket = rawSocket(b.url);
      assert.equal(await socket.opened, 101);
      socket.send({ type: 'connection_init', payload: { authorization: `Bearer ${token}` } });
      assert.deepEqual(await socket.closed, { code: 4403, reason: 'Forbidden: account deactivated' });
      // Her browser session was revoked: the cookie answers as signed out.
      await request(b.url).get('/auth/session').set('cookie', cookie).expect(401);
      assert.equal(
        (
          await request(b.url)
            .post('/graphql')
            .set({ cookie, 'content-type': 'application/json' })
            .send({ query: ORDERS })
        ).status,
        401,
      );
      // Signing in again does not help while the directory says no.
      assert.equal((await rest(await freshToken('alice'))).status, 401);

      // Bob is unaffected: his requests and his open subscription go on.
      await rest(bob).expect(200);
      const bobsOrder = await request(a.url)
        .post('/v1/orders')
        .set({ authorization: `Bearer ${bob}`, 'idempotency-key': randomUUID() })
        .send({ items: [{ sku: 'DL-009', qty: 1 }] })
        .expect(201);
      await within(5_000, "bob's subscription delivering", bobsOrders.next(1));
      assert.equal(
        (bobsOrders.received[0]!.data as { orderCreated: { id: string } }).orderCreated.id,
        bobsOrder.body.id,
      );
      bobs.dispose();

      // Reactivation restores access for newly issued tokens and sign-ins; what was issued before stays refused.
      await dir.patch(`/Users/${alice.id}`, [{ op: 'replace', path: 'active', value: true }]).expect(200);
      const fresh = await freshToken('alice');
      await until(200, 5_000, () => rest(fresh));
      await graphql(fresh).expect(200);
      assert.equal((await rest(token)).status, 401);
      await request(b.url).get('/auth/session').set('cookie', cookie).expect(401);
      await request(b.url)
        .get('/auth/session')
        .set('cookie', await sessionCookie('alice'))
        .expect(200);
      const again = subscriber(b.url, fresh);
      await again.connected();
      again.dispose();
    });

    test('the staff group decides the staff role: members gain it, and a staff token loses it when removed', async () => {
      await active('alice');
      const alice = await freshToken('alice');
      const order = await request(b.url)
        .post('/v1/orders')
        .set({ authorization: `Bearer ${alice}`, 'idempotency-key': randomUUID() })
        .send({ items: [{ sku: 'DL-009', qty: 1 }] })
        .expect(201);
      const [bob, carol] = [await freshToken('bob'), await freshToken('carol')];
      const read = (token: string) => rest(token, `/v1/orders/${order.body.id}`);
      // Before the directory has a staff group, roles come from the token: carol is staff, bob a customer.
      await read(carol).expect(200);
      await read(bob).expect(404);

      const [bobUser, carolUser] = [await provision('bob'), await provision('carol')];
      const created = await dir.post('/Groups', {
        schemas: [GROUP_SCHEMA],
        displayName: 'Staff',
        members: [{ value: bobUser.id }],
      });
      assert.equal(created.status, 201, created.text);
      const group = created.body as { id: string };
      // Now the group decides: bob is staff, and carol's token no longer makes her staff.
      await reaches('the staff group', [200, () => read(bob)], [404, () => read(carol)]);

      await dir
        .patch(`/Groups/${group.id}`, [{ op: 'Add', path: 'members', value: [{ value: carolUser.id }] }])
        .expect(200);
      await reaches('carol joining the staff group', [200, () => read(carol)]);
      // Carol holds a staff subscription; when the directory takes her out of the group it ends (authorised as staff).
      const listening = b.nextSubscription();
      const carols = subscriber(b.url, carol);
      carols.subscribe(ORDER_CREATED);
      await listening;
      await dir
        .patch(`/Groups/${group.id}`, [{ op: 'remove', path: `members[value eq "${carolUser.id}"]` }])
        .expect(200);
      const removed = boundWindow("carol's staff WebSocket closing");
      assert.deepEqual(await removed.effect(carols.closed()), {
        code: 4403,
        reason: 'roles changed at the directory; reconnect',
      });
      removed.check();
      await read(carol).expect(404);
      await read(bob).expect(200);

      // Renaming the group away, or deleting it, gives the tokens' roles back: bob, staff by the directory alone, loses
      // the role and his streams (WebSocket and SSE) end; carol, staff by her token, gains it and hers end too.
      const staffStreams = async () => {
        // One at a time, each waited for until the server holds it.
        let listening = b.nextSubscription();
        const bobs = subscriber(b.url, bob);
        bobs.subscribe(ORDER_CREATED);
        await listening;
        listening = b.nextSubscription();
        const bobsSse = await sseStream(b.url, { authorization: `Bearer ${bob}` });
        assert.equal(bobsSse.res.status, 200);
        await listening;
        listening = b.nextSubscription();
        const carols = subscriber(b.url, carol);
        carols.subscribe(ORDER_CREATED);
        await listening;
        return async (what: string) => {
          const window = boundWindow(what);
          const changed = { code: 4403, reason: 'roles changed at the directory; reconnect' };
          assert.deepEqual(await window.effect(bobs.closed()), changed);
          assert.match(await window.effect(bobsSse.text), /: closed: roles changed at the directory; reconnect\n\n$/);
          assert.deepEqual(await window.effect(carols.closed()), changed);
          window.check();
        };
      };
      const renamed = await staffStreams();
      await dir
        .patch(`/Groups/${group.id}`, [{ op: 'replace', path: 'displayName', value: 'Former staff' }])
        .expect(200);
      await renamed('streams closing when the staff group is renamed');
      await read(bob).expect(404);
      await read(carol).expect(200);

      await dir
        .put(`/Groups/${group.id}`, { schemas: [GROUP_SCHEMA], displayName: 'staff', members: [{ value: bobUser.id }] })
        .expect(200);
      await reaches('the staff group back', [200, () => read(bob)], [404, () => read(carol)]);
      const deleted = await staffStreams();
      await dir.delete(`/Groups/${group.id}`).expect(204);
      await deleted('streams closing when the staff group is deleted');
      await reaches('the staff group gone', [404, () => read(bob)], [200, () => read(carol)]);
    });

    test("a deactivated user's tokens stay refused whatever the directory does to her externalId; only reactivation under a key lets new tokens in", async () => {
      /** The directory user linked to this subject, provisioned if need be, and active. */
      const linked = async (subject: string) => {
        const found = await dir.get(`/Users?filter=${encodeURIComponent(`externalId eq "${subject}"`)}`).expect(200);
        return found.body.totalResults ? active(subject) : provision(subject);
      };
      const [bob, carol] = [await linked('bob'), await linked('carol')];
      /**
       * Resolves once B has read every directory write so far: a later write (carol's deactivation) has reached it,
       * and replicas read the directory's writes in commit order.
       */
      const caughtUp = async () => {
        const marker = await freshToken('carol');
        await until(200, 10 * BOUND_MS, () => rest(marker));
        await dir.patch(`/Users/${carol.id}`, [{ op: 'replace', path: 'active', value: false }]).expect(200);
        await until(401, 10 * BOUND_MS, () => rest(marker));
        await dir.patch(`/Users/${carol.id}`, [{ op: 'replace', path: 'active', value: true }]).expect(200);
      };
      const token = await freshToken('bob');
      await rest(token).expect(200);
      await secondAfter(token);
      await dir.patch(`/Users/${bob.id}`, [{ op: 'replace', path: 'active', value: false }]).expect(200);
      await reaches('the deactivation', [401, () => rest(token)]);

      const renamed = await dir
        .patch(`/Users/${bob.id}`, [{ op: 'replace', path: 'externalId', value: 'bob-renamed' }])
        .expect(200);
      assert.equal(renamed.body.externalId, 'bob-renamed');
      assert.equal(renamed.body.active, false);
      await caughtUp();
      const refused = await rest(token).expect(401);
      assert.equal(refused.headers['www-authenticate'], DEACTIVATED);
      assert.equal((await rest(await freshToken('bob'))).status, 401);

      const unlinked = await dir.patch(`/Users/${bob.id}`, [{ op: 'remove', path: 'externalId' }]).expect(200);
      assert.equal(unlinked.body.externalId, undefined);
      await caughtUp();
      await rest(token).expect(401);

      // A replica started now reads the same refusal from the database.
      const c = await startTestServer({ OIDC_ISSUER: issuer }, { sameDatabaseAs: a });
      try {
        assert.equal((await request(c.url).get('/v1/orders').set('authorization', `Bearer ${token}`)).status, 401);
      } finally {
        await c.close();
      }

      // Linked again and reactivated: new tokens work, what was issued before the deactivation stays refused.
      await dir.patch(`/Users/${bob.id}`, [{ op: 'add', path: 'externalId', value: 'bob' }]).expect(200);
      await caughtUp();
      await rest(token).expect(401);
      await dir.patch(`/Users/${bob.id}`, [{ op: 'replace', path: 'active', value: true }]).expect(200);
      const fresh = await freshToken('bob');
      await until(200, 10 * BOUND_MS, () => rest(fresh));
      assert.equal((await rest(token)).status, 401);
    });

    test('a deleted user stays refused, also by a restarted replica and by just-in-time provisioning; only the directory brings them back', async () => {
      const alice = await active('alice');
      const token = await freshToken('alice');
      await rest(token).expect(200);
      await secondAfter(token);
      await dir.delete(`/Users/${alice.id}`).expect(204);
      await reaches('the deletion', [401, () => rest(token)]);
      // A fresh sign-in is not a way back: the customer record exists, but the subject stays refused.
      assert.equal((await rest(await freshToken('alice'))).status, 401);

      // The deny list is in the database: a replica started now refuses her at once.
      const c = await startTestServer({ OIDC_ISSUER: issuer }, { sameDatabaseAs: a });
      try {
        const refused = await request(c.url)
          .get('/v1/orders')
          .set('authorization', `Bearer ${await freshToken('alice')}`);
        assert.equal(refused.status, 401);
        assert.equal(refused.headers['www-authenticate'], DEACTIVATED);
        // SCIM is off on C (neither SCIM_TOKEN nor a scope for its external issuer): 404 in the SCIM error schema.
        const off = await request(c.url).get('/scim/v2/Users').set('authorization', `Bearer ${SCIM_TOKEN}`).expect(404);
        assert.equal(off.headers['content-type'], 'application/scim+json; charset=utf-8');
        assert.equal(off.body.status, '404');
      } finally {
        await c.close();
      }

      // The directory provisions her again: a new user, and her fresh tokens work.
      await provision('alice');
      const back = await freshToken('alice');
      await until(200, 5_000, () => rest(back));
      assert.equal((await rest(token)).status, 401);
    });

    /**
     * Every SCIM request shape that deactivates someone, by what it does to the key their tokens and sessions carry
     * (externalId): each must end all of it, on both replicas, whatever becomes of the key.
     */
    const SHAPES: ['PATCH' | 'PUT' | 'DELETE', 'removed' | 'left out' | 'changed' | 'kept'][] = [
      ['PATCH', 'removed'],
      ['PATCH', 'changed'],
      ['PATCH', 'kept'],
      ['PUT', 'left out'],
      ['PUT', 'changed'],
      ['PUT', 'kept'],
      ['DELETE', 'kept'],
    ];

    test.each(SHAPES)(
      'a %s with active false and externalId %s ends her tokens, session, streams and webhook on both replicas',
      async (method, key) => {
        const renamed = `alice-${method}-${key.replace(' ', '-')}`;
        const linked = await dir.get(`/Users?filter=${encodeURIComponent('externalId eq "alice"')}`).expect(200);
        // Linked to her under a userName of this case's own, so that no other case's outcome is in its way.
        const provisionHer = async (label: string) => {
          const res = await dir.post('/Users', userBody(`${label}@example.com`, { externalId: 'alice' }));
          assert.equal(res.status, 201, res.text);
          return res.body as { id: string };
        };
        const user = linked.body.totalResults ? await active('alice') : await provisionHer(renamed);
        const { userName } = (await dir.get(`/Users/${user.id}`).expect(200)).body as { userName: string };
        const token = await freshToken('alice');
        await until(200, 10 * BOUND_MS, () => rest(token));
        const cookie = await sessionCookie('alice');
        await request(b.url).get('/auth/session').set('cookie', cookie).expect(200);

        // Her endpoint hears of status changes to her orders; carol's (staff) of everyone's, as the control.
        const [hers, carols] = [await startWebhookReceiver(), await startWebhookReceiver()];
        receivers.push(hers, carols);
        const carol = await a.token('carol');
        const endpoint = async (bearer: string, url: string) => {
          const res = await request(a.url)
            .post('/v1/webhook-endpoints')
            .set('authorization', `Bearer ${bearer}`)
            .send({ url, events: ['order.status_changed'] });
          assert.equal(res.status, 201, res.text);
          return res.body as { id: string };
        };
        const herEndpoint = await endpoint(token, hers.url);
        await endpoint(carol, carols.url);
        const order = await request(a.url)
          .post('/v1/orders')
          .set({ authorization: `Bearer ${token}`, 'idempotency-key': randomUUID() })
          .send({ items: [{ sku: 'DL-009', qty: 1 }] })
          .expect(201);

        const listening = Promise.all([b.nextSubscription(), b.nextSubscription()]);
        const ws = subscriber(b.url, token);
        ws.subscribe(ORDER_CREATED);
        const stream = await sseStream(b.url, { authorization: `Bearer ${token}` });
        assert.equal(stream.res.status, 200);
        await listening;

        // Her token stays refused after the reactivation below, counted in whole seconds of `iat`.
        await secondAfter(token);
        const path = `/Users/${user.id}`;
        const written =
          method === 'PATCH'
            ? await dir.patch(path, [
                { op: 'replace', path: 'active', value: false },
                ...(key === 'removed' ? [{ op: 'remove', path: 'externalId' }] : []),
                ...(key === 'changed' ? [{ op: 'replace', path: 'externalId', value: renamed }] : []),
              ])
            : method === 'PUT'
              ? await dir.put(
                  path,
                  userBody(userName, {
                    active: false,
                    ...(key === 'changed' ? { externalId: renamed } : key === 'kept' ? { externalId: 'alice' } : {}),
                  }),
                )
              : await dir.delete(path);
        assert.equal(written.status, method === 'DELETE' ? 204 : 200, written.text);
        if (method !== 'DELETE') {
          assert.equal(written.body.active, false);
          assert.equal(written.body.externalId, key === 'changed' ? renamed : key === 'kept' ? 'alice' : undefined);
        }

        // Her streams on B end: B has heard of it.
        assert.deepEqual(await within(10 * BOUND_MS, 'her WebSocket closing', ws.closed()), {
          code: 4403,
          reason: 'account deactivated',
        });
        assert.match(
          await within(10 * BOUND_MS, 'her SSE stream ending', stream.text),
          /: closed: account deactivated\n\n$/,
        );
        for (const replica of [a, b]) {
          const refused = await request(replica.url).get('/v1/orders').set('authorization', `Bearer ${token}`);
          assert.equal(refused.status, 401);
          assert.equal(refused.headers['www-authenticate'], DEACTIVATED);
          const refusedGraphql = await request(replica.url)
            .post('/graphql')
            .set({ authorization: `Bearer ${token}`, 'content-type': 'application/json' })
            .send({ query: ORDERS });
          assert.equal(refusedGraphql.status, 401);
          assert.equal(refusedGraphql.body.errors[0].extensions.code, 'UNAUTHENTICATED');
          const socket = rawSocket(replica.url);
          assert.equal(await socket.opened, 101);
          socket.send({ type: 'connection_init', payload: { authorization: `Bearer ${token}` } });
          assert.deepEqual(await socket.closed, { code: 4403, reason: 'Forbidden: account deactivated' });
          await request(replica.url).get('/auth/session').set('cookie', cookie).expect(401);
        }

        // A status change of her order reaches carol's endpoint, and is not made for hers.
        const etag = (await rest(carol, `/v1/orders/${order.body.id}`).expect(200)).headers.etag!;
        await request(a.url)
          .patch(`/v1/orders/${order.body.id}`)
          .set({ authorization: `Bearer ${carol}`, 'if-match': etag })
          .send({ status: 'paid' })
          .expect(200);
        const about = (r: { payload: { data: { order?: { id: string } } } }) =>
          r.payload.data.order?.id === order.body.id;
        await carols.waitFor((all) => all.some(about), "carol's order.status_changed");

        // Linked and active again (as the other tests expect her): only the log written meanwhile is read.
        if (method === 'DELETE') await provisionHer(`${renamed}-again`);
        else {
          await dir
            .patch(path, [
              { op: 'replace', path: 'active', value: true },
              { op: 'add', path: 'externalId', value: 'alice' },
            ])
            .expect(200);
        }
        const fresh = await freshToken('alice');
        await until(200, 10 * BOUND_MS, () => rest(fresh));
        assert.equal((await rest(token)).status, 401);
        const log = await rest(fresh, `/v1/webhook-endpoints/${herEndpoint.id}/deliveries`).expect(200);
        assert.deepEqual(log.body.deliveries, []);
        assert.equal(hers.received.length, 0);
      },
    );
  });
});

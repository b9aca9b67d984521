import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, test } from '@jest/globals';
import request from 'supertest';
import { startTestServer, type TestServer } from '../helpers/server.js';
import {
  assertScimError,
  directory,
  ERROR_SCHEMA,
  directoryAccessToken,
  GROUP_SCHEMA,
  SCIM_JSON,
  SCIM_TOKEN,
  USER_SCHEMA,
  userBody,
  type Directory,
} from '../helpers/scim.js';

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
    assert.deepEqual(only.Resources, [{ schemas: [USER_SCHEMA], id: users[1]!.id, userName: `${tag}-2@example.com` }]);
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
      for (const filter of ['meta.created pr', 'meta.lastModified pr', 'meta.created gt "0001-01-01T23:59:00+23:59"']) {
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
      [[{ op: 'replace', path: 'name', value: JSON.parse('{"__proto__": {"polluted": "yes"}}') }], 400, 'invalidValue'],
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
    const put = await dir.put(`/Users/${user.id}`, { ...full, active: false, displayName: 'Okta Person', groups: [] });
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
      .post('/Users', userBody(unique('many'), { emails: Array.from({ length: 20 }, (_, i) => ({ value: `${i}@b` })) }))
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
      { value: u1.id, display: u1.userName, type: 'User', $ref: `${server.running.publicUrl}/scim/v2/Users/${u1.id}` },
    ]);
    const membersOf = async () =>
      ((await dir.get(`/Groups/${group.id}`).expect(200)).body as ScimGroup).members?.map((m) => m.value).sort() ?? [];

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
    await dir.patch(`/Groups/${group.id}`, [{ op: 'Remove', path: 'members', value: [{ value: u3.id }] }]).expect(200);
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

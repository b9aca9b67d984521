import assert from 'node:assert/strict';
import { setImmediate } from 'node:timers/promises';
import { afterAll, beforeAll, describe, test } from '@jest/globals';
import pg from 'pg';
import request from 'supertest';
import { POOL_SIZE } from '../../src/store/postgres.js';
import type { Problem } from '../helpers/http.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { WebClient, location, signInAtIdp, startLogin } from '../helpers/webClient.js';

const CAP = 5;
/** A sign-in start costs 10 points: 700 points a window are 70 starts per address. */
const POINTS = 700;
const STARTS = 70;

describe('sign-in attempts an anonymous caller can make the server store', () => {
  let server: TestServer;
  beforeAll(async () => {
    // Behind one proxy hop the client address is the X-Forwarded-For entry the proxy added.
    server = await startTestServer({
      LOGIN_ATTEMPTS_PER_IP: String(CAP),
      TRUST_PROXY: '1',
      RATE_LIMIT_POINTS: String(POINTS),
      RATE_LIMIT_WINDOW_S: '3600',
    });
  });
  afterAll(() => server?.close());

  const rows = async (ip?: string) =>
    (
      await server.running.app.db.query<{ n: number }>(
        `select count(*)::int as n from auth_login_attempts where $1::text is null or client_ip = $1`,
        [ip ?? null],
      )
    )[0]!.n;
  const attemptIds = async (ip: string) =>
    (
      await server.running.app.db.query<{ id_hash: string }>(
        'select id_hash from auth_login_attempts where client_ip = $1 order by id_hash',
        [ip],
      )
    ).map((r) => r.id_hash);

  const start = (ip: string, accept?: string) => {
    const req = request(server.running.publicUrl).get('/auth/login?returnTo=/').set('x-forwarded-for', ip);
    return accept ? req.set('accept', accept) : req;
  };
  /** How many answers had each status. */
  const tally = (answers: { status: number }[]) =>
    answers.reduce<Record<number, number>>((t, a) => ({ ...t, [a.status]: (t[a.status] ?? 0) + 1 }), {});
  const concurrently = (n: number, ip: string) => Promise.all(Array.from({ length: n }, () => start(ip)));

  test('a flood of GET /auth/login from one address keeps at most LOGIN_ATTEMPTS_PER_IP rows for it', async () => {
    for (let i = 0; i < 60; i++) {
      await request(server.running.publicUrl).get('/auth/login').set('x-forwarded-for', '203.0.113.7').expect(302);
    }
    assert.equal(await rows('203.0.113.7'), CAP);
  });

  test('a flood from one address does not touch the sign-ins of another', async () => {
    const browser = new WebClient();
    const authorizationUrl = await startLogin(browser, server.running.publicUrl);
    for (let i = 0; i < 3 * CAP; i++) {
      await request(server.running.publicUrl).get('/auth/login').set('x-forwarded-for', '198.51.100.9').expect(302);
    }
    const callback = await signInAtIdp(browser, authorizationUrl, 'alice');
    assert.equal((await browser.get(callback)).status, 303, 'the earlier sign-in from 127.0.0.1 still completes');
    assert.ok((await rows()) <= 3 * CAP, 'storage stays bounded by addresses × LOGIN_ATTEMPTS_PER_IP');
  });

  test('the newest attempt of a flooded address still signs in', async () => {
    const browser = new WebClient();
    const started = await browser.get(`${server.running.publicUrl}/auth/login`, { 'x-forwarded-for': '203.0.113.7' });
    assert.equal(started.status, 302);
    const callback = await signInAtIdp(browser, location(started), 'bob');
    assert.equal((await browser.get(callback)).status, 303);
  });

  /**
   * Sends `n` starts from one address at once. On PostgreSQL the address first holds 100 rows past its bound (as after
   * LOGIN_ATTEMPTS_PER_IP is lowered), so each trim has many to delete, and the test deletes the oldest, as a callback
   * would, in a transaction it holds open: trims that wait for that row pile up, and all go on at once when the test
   * commits, once every start has answered or every connection of the server's pool waits, however loaded the machine.
   */
  async function allAtOnce(n: number, ip: string) {
    if (!process.env.DATABASE_URL) return concurrently(n, ip);
    await server.running.app.db.query(
      `insert into auth_login_attempts (id_hash, state, nonce, code_verifier, return_to, client_ip, created_at, expires_at)
       select $1 || '-' || i, 's', 'n', 'v', '/', $1, now() - make_interval(secs => i), now() + interval '10 minutes'
       from generate_series(1, 100) i`,
      [ip],
    );
    const locker = new pg.Client({
      connectionString: process.env.DATABASE_URL,
      options: `-c search_path="${server.schema!}"`,
    });
    await locker.connect();
    try {
      await locker.query('begin');
      await locker.query(
        `delete from auth_login_attempts
         where id_hash = (select id_hash from auth_login_attempts where client_ip = $1 order by created_at limit 1)`,
        [ip],
      );
      let answered = 0;
      const answers = Promise.all(Array.from({ length: n }, () => start(ip).then((res) => (answered++, res))));
      const waiting = async () => {
        // Within a transaction pg_stat_activity is read once, unless its snapshot is cleared.
        await locker.query('select pg_stat_clear_snapshot()');
        const { rows } = await locker.query<{ n: number }>(
          `with recursive behind(pid) as (
             select pid from pg_stat_activity where pg_backend_pid() = any(pg_blocking_pids(pid))
             union
             select a.pid from pg_stat_activity a join behind b on b.pid = any(pg_blocking_pids(a.pid))
           )
           select count(*)::int as n from behind`,
        );
        return rows[0]!.n;
      };
      while (answered < n && (await waiting()) < POOL_SIZE) await setImmediate();
      await locker.query('commit');
      return await answers;
    } finally {
      await locker.end();
    }
  }

  test('50 concurrent sign-in starts from one address all redirect, and it keeps LOGIN_ATTEMPTS_PER_IP rows', async () => {
    // Each start inserts a row and trims the address's oldest: on PostgreSQL, concurrent trims of one address used to
    // deadlock, answering 500. Three rounds, each from an address of its own, within its budget.
    const ips = ['192.0.2.50', '192.0.2.51', '192.0.2.52'];
    const answers = [];
    for (const ip of ips) answers.push(tally(await allAtOnce(50, ip)));
    assert.deepEqual(answers, [{ 302: 50 }, { 302: 50 }, { 302: 50 }]);
    for (const ip of ips) assert.equal(await rows(ip), CAP, ip);
  });

  test('starts spend their address budget: the last one allowed redirects, the first one past it is 429', async () => {
    const ip = '192.0.2.70';
    assert.deepEqual(tally(await concurrently(STARTS - 1, ip)), { 302: STARTS - 1 });

    const last = await start(ip);
    assert.equal(last.status, 302);
    assert.equal(last.headers['ratelimit-policy'], `"orders";q=${POINTS};w=3600`);
    assert.match(last.headers.ratelimit!, /^"orders";r=0;t=\d+$/);
    assert.equal(last.headers['retry-after'], undefined);
    const kept = await attemptIds(ip);

    const refused = await start(ip);
    assert.equal(refused.status, 429);
    assert.equal(refused.headers['content-type'], 'text/html; charset=utf-8');
    assert.equal(refused.headers['cache-control'], 'no-store');
    assert.equal(refused.headers['set-cookie'], undefined, 'no login cookie');
    const reset = Number(refused.headers['retry-after']);
    assert.ok(Number.isInteger(reset) && reset >= 1 && reset <= 3600, `Retry-After ${refused.headers['retry-after']}`);
    assert.equal(refused.headers.ratelimit, `"orders";r=0;t=${reset}`);
    assert.equal(refused.headers['ratelimit-policy'], `"orders";q=${POINTS};w=3600`);
    assert.match(refused.text, /<h1>Too many sign-ins<\/h1>/);
    assert.match(refused.text, new RegExp(`retry in ${reset} seconds`));
    assert.deepEqual(await attemptIds(ip), kept, 'a refused start stores nothing');

    // A client that asks for JSON gets the API's problem, with the same headers.
    const problem = await start(ip, 'application/problem+json');
    assert.equal(problem.status, 429);
    assert.equal(problem.headers['content-type'], 'application/problem+json; charset=utf-8');
    // The window runs on between the two answers: a second may have passed.
    const later = Number(problem.headers['retry-after']);
    assert.ok(later === reset || later === reset - 1, `Retry-After ${later} after ${reset}`);
    assert.deepEqual(JSON.parse(problem.text) as Problem, {
      type: '/problems/rate-limited',
      title: 'Rate limit exceeded',
      status: 429,
      detail: `Too many sign-ins were started from this address; retry in ${later} seconds.`,
      instance: '/auth/login',
      code: 'RATE_LIMITED',
    });

    // The budget is the address's: another address still starts.
    assert.equal((await start('192.0.2.71')).status, 302);
  });

  test('80 concurrent starts from one address: exactly the budget is admitted, the rest are 429, none fails', async () => {
    const ip = '192.0.2.80';
    assert.deepEqual(tally(await concurrently(80, ip)), { 302: STARTS, 429: 80 - STARTS });
    assert.equal(await rows(ip), CAP);
  });
});

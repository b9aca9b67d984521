import { describe, test } from '@jest/globals';
import assert from 'node:assert/strict';
import { safeReturnTo } from '../../src/http/browser/signIn.js';
import {
  authCookies,
  isForeignOrigin,
  readCookie,
  serializeCookie,
  trustedOrigins,
} from '../../src/http/middleware/cookies.js';

describe('browser sign-in cookies', () => {
  test('over https the session cookie is __Host- prefixed and Secure', () => {
    const names = authCookies('https://orders.example.com');
    assert.deepEqual(names, { secure: true, session: '__Host-orders_session', login: '__Secure-orders_login' });
    assert.equal(
      serializeCookie(names.session, 'v', { path: '/', maxAge: 43200, secure: names.secure }),
      '__Host-orders_session=v; Path=/; HttpOnly; SameSite=Lax; Max-Age=43200; Secure',
    );
  });

  test('over plain http (development) the cookies have no prefix and no Secure', () => {
    assert.deepEqual(authCookies('http://localhost:4000'), {
      secure: false,
      session: 'orders_session',
      login: 'orders_login',
    });
  });

  test('reads one cookie, and none when the name is sent twice (a planted duplicate)', () => {
    assert.equal(readCookie('a=1; orders_session=abc; b=2', 'orders_session'), 'abc');
    assert.equal(readCookie('xorders_session=abc', 'orders_session'), undefined);
    assert.equal(readCookie('orders_session=abc; orders_session=def', 'orders_session'), undefined);
    assert.equal(readCookie(undefined, 'orders_session'), undefined);
  });

  test('trusts the public origin and the CORS origins, nothing else', () => {
    const trusted = trustedOrigins('https://orders.example.com/base', ['https://shop.example.com']);
    assert.equal(isForeignOrigin(undefined, trusted), false);
    assert.equal(isForeignOrigin('https://orders.example.com', trusted), false);
    assert.equal(isForeignOrigin('https://shop.example.com', trusted), false);
    assert.equal(isForeignOrigin('https://evil.example', trusted), true);
    assert.equal(isForeignOrigin('null', trusted), true);
  });
});

describe('returnTo', () => {
  const publicUrl = 'https://orders.example.com';

  test('keeps paths on this origin', () => {
    assert.equal(safeReturnTo(undefined, publicUrl), '/');
    assert.equal(safeReturnTo('/orders?page=2#top', publicUrl), '/orders?page=2#top');
    assert.equal(safeReturnTo('/a/../b', publicUrl), '/b');
  });

  test('refuses anything that could leave it', () => {
    for (const value of [
      'https://evil.example/',
      '//evil.example',
      '/\\evil.example',
      '\\\\evil.example',
      'evil.example',
      'javascript:alert(1)',
      '/\tevil',
      ['/a', '/b'],
      '/' + 'a'.repeat(2048),
    ]) {
      assert.equal(safeReturnTo(value, publicUrl), null, JSON.stringify(value));
    }
  });
});

import assert from 'node:assert/strict';
import { describe, test } from '@jest/globals';
import { normalizedUri } from '../../src/auth/uriNormalization.js';

describe('URIs compare as RFC 3986 §6.2.2 and §6.2.3 normalize them', () => {
  const same = (a: string, b: string) => assert.equal(normalizedUri(a)?.href, normalizedUri(b)?.href, `${a} ≡ ${b}`);
  const differ = (a: string, b: string) =>
    assert.notEqual(normalizedUri(a)?.href, normalizedUri(b)?.href, `${a} ≢ ${b}`);

  test('an empty http(s) path is "/", and the default port is no port (§6.2.3)', () => {
    same('http://127.0.0.1:4150', 'http://127.0.0.1:4150/');
    same('https://api.example.com', 'https://api.example.com:443/');
    same('http://api.example.com:80', 'http://api.example.com/');
    differ('http://api.example.com:8080', 'http://api.example.com/');
  });

  test('scheme and host are case-insensitive, the path is not (§6.2.2.1)', () => {
    same('HTTPS://API.Example.COM/orders', 'https://api.example.com/orders');
    same('URN:orders-api', 'urn:orders-api');
    differ('https://api.example.com/Orders', 'https://api.example.com/orders');
  });

  test('percent-encoded unreserved characters are those characters; other escapes are case-insensitive (§6.2.2.2)', () => {
    same('https://api.example.com/%7Eorders', 'https://api.example.com/~orders');
    same('https://api.example.com/%41', 'https://api.example.com/A');
    same('https://api.example.com/a%2fb', 'https://api.example.com/a%2Fb');
    differ('https://api.example.com/a%2Fb', 'https://api.example.com/a/b');
    assert.equal(normalizedUri('https://api.example.com/a%2fb%7e')?.href, 'https://api.example.com/a%2Fb~');
  });

  test('dot segments are removed (§6.2.2.3)', () => {
    same('https://api.example.com/a/./b/../c', 'https://api.example.com/a/c');
    same('http://127.0.0.1:4150/./', 'http://127.0.0.1:4150');
  });

  test('what is not an absolute URI has no normal form', () => {
    assert.equal(normalizedUri('orders-api'), null);
    assert.equal(normalizedUri('/relative/path'), null);
    assert.equal(normalizedUri(''), null);
  });
});

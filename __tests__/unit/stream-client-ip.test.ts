import assert from 'node:assert/strict';
import type { IncomingMessage } from 'node:http';
import { describe, test } from '@jest/globals';
import { clientIp as ipOf, isTrustedPeer, proxyTrust } from '../../src/http/middleware/index.js';

const clientIp = (req: IncomingMessage, setting: boolean | number | string[]) => ipOf(req, proxyTrust(setting));

const upgrade = (peer: string, forwardedFor?: string) =>
  ({
    socket: { remoteAddress: peer },
    headers: forwardedFor === undefined ? {} : { 'x-forwarded-for': forwardedFor },
  }) as unknown as IncomingMessage;

describe('the client address of a WebSocket handshake, and which peers are trusted proxies (TRUST_PROXY)', () => {
  test('without a trusted proxy it is the peer, whatever X-Forwarded-For claims', () => {
    assert.equal(clientIp(upgrade('10.0.0.5', '203.0.113.7'), false), '10.0.0.5');
    assert.equal(clientIp(upgrade('10.0.0.5', '203.0.113.7'), 0), '10.0.0.5');
  });

  test('a hop count trusts that many proxies from the right, as Express does', () => {
    const req = upgrade('10.0.0.5', 'spoofed, 203.0.113.7, 10.0.0.9');
    assert.equal(clientIp(req, 1), '10.0.0.9');
    assert.equal(clientIp(req, 2), '203.0.113.7');
    assert.equal(clientIp(req, 9), 'spoofed');
  });

  test('true trusts every hop: the left-most address', () => {
    assert.equal(clientIp(upgrade('10.0.0.5', '203.0.113.7, 10.0.0.9'), true), '203.0.113.7');
    assert.equal(clientIp(upgrade('10.0.0.5'), true), '10.0.0.5');
  });

  test('addresses and subnets trust those peers alone: a spoofed X-Forwarded-For from any other peer earns nothing', () => {
    const list = ['127.0.0.1', '10.0.0.0/8'];
    assert.equal(clientIp(upgrade('127.0.0.1', '203.0.113.7'), list), '203.0.113.7');
    assert.equal(clientIp(upgrade('10.1.2.3', 'spoofed, 203.0.113.7, 10.0.0.9'), list), '203.0.113.7');
    assert.equal(clientIp(upgrade('127.0.0.2', '203.0.113.7'), list), '127.0.0.2');
    assert.equal(clientIp(upgrade('::ffff:127.0.0.2', '203.0.113.7'), list), '127.0.0.2');
    assert.equal(isTrustedPeer(proxyTrust(list), '127.0.0.1'), true);
    assert.equal(isTrustedPeer(proxyTrust(list), '127.0.0.2'), false);
    assert.equal(isTrustedPeer(proxyTrust(['loopback']), '127.0.0.2'), true);
    assert.equal(isTrustedPeer(proxyTrust(false), '127.0.0.1'), false);
    assert.equal(isTrustedPeer(proxyTrust(1), '192.0.2.1'), true);
  });
});

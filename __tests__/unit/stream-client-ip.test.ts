import assert from 'node:assert/strict';
import type { IncomingMessage } from 'node:http';
import { describe, test } from '@jest/globals';
import { clientIp } from '../../src/http/realtime/streamRegistry.js';

const upgrade = (peer: string, forwardedFor?: string) =>
  ({
    socket: { remoteAddress: peer },
    headers: forwardedFor === undefined ? {} : { 'x-forwarded-for': forwardedFor },
  }) as unknown as IncomingMessage;

describe('the client address of a WebSocket handshake (TRUST_PROXY)', () => {
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
});

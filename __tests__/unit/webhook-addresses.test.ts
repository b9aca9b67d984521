import assert from 'node:assert/strict';
import { describe, test } from '@jest/globals';
import { blockedBecause } from '../../src/webhooks/index.js';

describe('webhook targets: IPv6 forms that carry an IPv4 address are judged by that address', () => {
  test('each embedding of a loopback or private IPv4 address is refused, naming the form and the address', () => {
    for (const [address, why] of [
      ['::ffff:127.0.0.1', 'the IPv4-mapped form of 127.0.0.1, a loopback address'],
      ['::ffff:7f00:1', 'the IPv4-mapped form of 127.0.0.1, a loopback address'],
      ['::7f00:1', 'the IPv4-compatible form of 127.0.0.1, a loopback address'],
      ['::127.0.0.1', 'the IPv4-compatible form of 127.0.0.1, a loopback address'],
      ['::ffff:0:7f00:1', 'the IPv4-translated (SIIT) form of 127.0.0.1, a loopback address'],
      ['::ffff:0:10.0.0.1', 'the IPv4-translated (SIIT) form of 10.0.0.1, a private address'],
      ['64:ff9b::a9fe:a9fe', 'the NAT64 form of 169.254.169.254, a link-local (cloud metadata) address'],
      ['64:ff9b::192.168.0.1', 'the NAT64 form of 192.168.0.1, a private address'],
      ['2002:7f00:1::1', 'the 6to4 form of 127.0.0.1, a loopback address'],
      ['2002:a00:1:ffff::', 'the 6to4 form of 10.0.0.1, a private address'],
      // Teredo: the server's address in clear, the client's with every bit inverted.
      ['2001:0:7f00:1::', 'the Teredo form of 127.0.0.1, a loopback address'],
      ['2001:0:cb00:710b:0:0:f5ff:fffe', 'the Teredo form of 10.0.0.1, a private address'],
      ['::ffff:0.0.0.1', 'the IPv4-mapped form of 0.0.0.1, a this network address'],
    ] as const) {
      assert.equal(blockedBecause(address), why, address);
    }
  });

  test('a local-use NAT64 address is refused whole: where its IPv4 address sits is the operator’s choice', () => {
    assert.equal(blockedBecause('64:ff9b:1::808:808'), 'a local-use NAT64 address');
    assert.equal(blockedBecause('64:ff9b:1:ffff:ffff::'), 'a local-use NAT64 address');
    assert.equal(blockedBecause('64:ff9b:2::1'), null, 'just past the /48');
  });

  test('an embedding of a public IPv4 address is as public as that address', () => {
    for (const address of [
      '::ffff:8.8.8.8',
      '::8.8.8.8',
      '::ffff:0:808:808',
      '64:ff9b::808:808',
      '2002:808:808::1',
      '2001:0:cb00:710b::f7f7:f7f7',
    ]) {
      assert.equal(blockedBecause(address), null, address);
    }
  });

  test('the IPv6 ranges of their own, and IPv4 itself, are unchanged', () => {
    assert.equal(blockedBecause('::1'), 'a loopback address');
    assert.equal(blockedBecause('::'), 'an unspecified address');
    assert.equal(blockedBecause('fd00:ec2::254'), 'a unique-local (fd00:ec2::254 is a metadata service) address');
    assert.equal(blockedBecause('fe80::1'), 'a link-local address');
    assert.equal(blockedBecause('127.0.0.1'), 'a loopback address');
    assert.equal(blockedBecause('2606:4700::1111'), null);
    assert.equal(blockedBecause('203.0.113.10'), null);
    assert.equal(blockedBecause('not-an-address'), 'not an IP address');
  });
});

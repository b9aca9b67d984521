import assert from 'node:assert/strict';
import { describe, test } from '@jest/globals';
import { ConfigError, loadConfig } from '../../src/config/index.js';

const NAMES = [
  'WS_IDLE_TIMEOUT_S',
  'WS_INIT_TIMEOUT_S',
  'WS_KEEPALIVE_S',
  'WS_MAX_PER_IP',
  'WS_MAX_SUBSCRIPTIONS_PER_SOCKET',
  'STREAMS_MAX_PER_USER',
  'SSE_ANONYMOUS_MAX_PER_IP',
  'SSE_RESERVATION_TTL_S',
  'LOGIN_ATTEMPTS_PER_IP',
  'SWEEP_INTERVAL_S',
];

describe('configuration of stream bounds and sweeping', () => {
  test('defaults', () => {
    const config = loadConfig({});
    assert.deepEqual(config.streams, {
      maxPerReplica: 10_000,
      wsIdleTimeoutSeconds: 60,
      wsInitTimeoutSeconds: 3,
      wsKeepAliveSeconds: 30,
      wsMaxPerIp: 50,
      wsMaxSubscriptionsPerSocket: 25,
      maxPerUser: 100,
      sseAnonymousMaxPerIp: 10,
      sseReservationTtlSeconds: 30,
    });
    assert.equal(config.loginAttemptsPerIp, 50);
    assert.equal(config.sweepIntervalSeconds, 300);
    assert.ok(Object.isFrozen(config.streams));
  });

  test('values are read as whole numbers', () => {
    const config = loadConfig({ WS_IDLE_TIMEOUT_S: '5', STREAMS_MAX_PER_USER: '7', LOGIN_ATTEMPTS_PER_IP: '3' });
    assert.equal(config.streams.wsIdleTimeoutSeconds, 5);
    assert.equal(config.streams.maxPerUser, 7);
    assert.equal(config.loginAttemptsPerIp, 3);
  });

  test('zero, negative, fractional or non-numeric bounds are refused, every one of them named', () => {
    const env = Object.fromEntries(NAMES.map((name, i) => [name, ['0', '-1', '1.5', 'lots'][i % 4]!]));
    try {
      loadConfig(env);
      assert.fail('expected a ConfigError');
    } catch (error) {
      assert.ok(error instanceof ConfigError);
      assert.deepEqual(error.problems.map((p) => p.split(':')[0]).sort(), [...NAMES].sort());
    }
  });
});

import assert from 'node:assert/strict';
import { describe, test } from '@jest/globals';
import { ConfigError, loadConfig } from '../../src/config.js';
import { ACR } from '../../src/domain/policy.js';

const problemsOf = (env: Record<string, string>) => {
  try {
    loadConfig(env);
  } catch (error) {
    assert.ok(error instanceof ConfigError);
    return error.problems;
  }
  assert.fail('expected a ConfigError');
};

describe('configuration', () => {
  test('defaults give a development server on localhost:4000 with embedded database and IdP', () => {
    const config = loadConfig({});
    assert.equal(config.port, 4000);
    assert.equal(config.host, '127.0.0.1');
    assert.equal(config.publicUrl, 'http://localhost:4000');
    assert.deepEqual(config.database, { kind: 'pglite', dataDir: './.data' });
    assert.equal(config.oidc.issuer, undefined);
    assert.equal(config.oidc.audience, 'orders-api');
    assert.equal(config.oidc.rolesClaim, 'roles');
    assert.equal(config.isProduction, false);
    assert.ok(Object.isFrozen(config) && Object.isFrozen(config.oidc));
  });

  test('METRICS_PORT: 9464 by default (0 under test), a port, 0 for a free one, or off; never the public port', () => {
    assert.equal(loadConfig({}).metricsPort, 9464);
    assert.equal(loadConfig({ NODE_ENV: 'test' }).metricsPort, 0);
    assert.equal(loadConfig({ METRICS_PORT: '9100' }).metricsPort, 9100);
    assert.equal(loadConfig({ METRICS_PORT: ' off ' }).metricsPort, null);
    assert.equal(loadConfig({ METRICS_PORT: '' }).metricsPort, 9464);
    assert.deepEqual(problemsOf({ METRICS_PORT: 'public' }), [
      'METRICS_PORT: METRICS_PORT must be a port (0 picks a free one) or off',
    ]);
    assert.deepEqual(problemsOf({ METRICS_PORT: '70000' }), [
      'METRICS_PORT: METRICS_PORT must be a port (0 picks a free one) or off',
    ]);
    assert.deepEqual(problemsOf({ PORT: '8080', METRICS_PORT: '8080' }), [
      'METRICS_PORT: must differ from PORT (metrics are never served on the public port)',
    ]);
    assert.deepEqual(problemsOf({ METRICS_PORT: '4000' }), [
      'METRICS_PORT: must differ from PORT (metrics are never served on the public port)',
    ]);
  });

  test('production browser sign-in needs an https issuer unless OIDC_ALLOW_HTTP=true says the network is private', () => {
    const prod = {
      NODE_ENV: 'production',
      DATABASE_URL: 'postgres://db/orders',
      OIDC_ISSUER: 'http://keycloak:8080/realms/orders',
      OIDC_CLIENT_ID: 'orders-web',
      OIDC_CLIENT_SECRET: 's',
    };
    assert.deepEqual(problemsOf(prod), [
      'OIDC_ISSUER: browser sign-in needs an https issuer in production; set OIDC_ALLOW_HTTP=true only for an issuer reached over a private network',
    ]);
    assert.equal(loadConfig({ ...prod, OIDC_ALLOW_HTTP: 'true' }).oidc.allowHttp, true);
    assert.equal(loadConfig({ ...prod, OIDC_ISSUER: 'https://id.example.com/realms/orders' }).oidc.allowHttp, false);
    // Without a client there is no browser sign-in: Bearer verification alone may use the issuer over http.
    assert.equal(loadConfig({ ...prod, OIDC_CLIENT_ID: '', OIDC_CLIENT_SECRET: '' }).oidc.clientId, undefined);
    assert.deepEqual(problemsOf({ ...prod, OIDC_ALLOW_HTTP: 'yes' }), [
      'OIDC_ALLOW_HTTP: OIDC_ALLOW_HTTP must be true or false',
      'OIDC_ISSUER: browser sign-in needs an https issuer in production; set OIDC_ALLOW_HTTP=true only for an issuer reached over a private network',
    ]);
  });

  test('lists every problem at once', () => {
    assert.deepEqual(
      problemsOf({
        PORT: 'eighty',
        DATABASE_URL: 'mysql://x',
        LOG_LEVEL: 'loud',
        CORS_ORIGINS: 'https://a.example/path',
      }),
      [
        'PORT: Invalid input: expected number, received NaN',
        'DATABASE_URL: DATABASE_URL must start with postgres:// or postgresql://',
        'CORS_ORIGINS.0: CORS_ORIGINS must be a comma-separated list of origins such as https://app.example.com',
        'LOG_LEVEL: Invalid option: expected one of "fatal"|"error"|"warn"|"info"|"debug"|"trace"|"silent"',
      ],
    );
  });

  test('production refuses the embedded identity provider and the embedded database', () => {
    assert.deepEqual(problemsOf({ NODE_ENV: 'production' }), [
      'OIDC_ISSUER: is required in production (the embedded identity provider is for development only)',
      'DATABASE_URL: is required in production (the embedded database is for development only)',
    ]);
  });

  test('production with an issuer and a database is accepted', () => {
    const config = loadConfig({
      NODE_ENV: 'production',
      OIDC_ISSUER: 'https://id.example.com/realms/orders/',
      DATABASE_URL: 'postgres://db/orders',
      ROLES_CLAIM: 'realm_access.roles',
    });
    assert.equal(config.isProduction, true);
    assert.equal(config.oidc.issuer, 'https://id.example.com/realms/orders');
    assert.equal(config.oidc.rolesClaim, 'realm_access.roles');
  });

  test('contradictory settings are refused', () => {
    assert.deepEqual(problemsOf({ OIDC_CLIENT_SECRET: 's', DATABASE_SCHEMA: 'x' }), [
      'OIDC_CLIENT_ID: OIDC_CLIENT_ID/OIDC_CLIENT_SECRET have no meaning without OIDC_ISSUER',
      'OIDC_CLIENT_SECRET: is set but OIDC_CLIENT_ID is not',
      'DATABASE_SCHEMA: only applies together with DATABASE_URL',
    ]);
  });

  test('PUBLIC_URL loses a trailing slash and must not carry a query', () => {
    assert.equal(loadConfig({ PUBLIC_URL: 'https://api.example.com/' }).publicUrl, 'https://api.example.com');
    assert.deepEqual(problemsOf({ PUBLIC_URL: 'https://api.example.com/?x=1' }), [
      'PUBLIC_URL: PUBLIC_URL must be an http(s) URL without query or fragment',
    ]);
  });
});

describe('STEP_UP_ACR and STEP_UP_MAX_AGE_S', () => {
  const ACR_PROBLEM =
    'STEP_UP_ACR: STEP_UP_ACR must be off or up to 10 space-separated acr values of visible ASCII without quotes or backslashes';

  test('the MFA level within 900 seconds by default; off turns the rule off; a list is kept in order', () => {
    assert.deepEqual(loadConfig({}).stepUp, { acrValues: [ACR.mfa], maxAgeSeconds: 900 });
    assert.deepEqual(loadConfig({ STEP_UP_ACR: '' }).stepUp, { acrValues: [ACR.mfa], maxAgeSeconds: 900 });
    assert.equal(loadConfig({ STEP_UP_ACR: 'off' }).stepUp, null);
    assert.deepEqual(loadConfig({ STEP_UP_ACR: ' gold  silver ', STEP_UP_MAX_AGE_S: '60' }).stepUp, {
      acrValues: ['gold', 'silver'],
      maxAgeSeconds: 60,
    });
  });

  test('at most 10 values of visible ASCII without quotes or backslashes; max age 1 to 86400 seconds', () => {
    const ten = Array.from({ length: 10 }, (_, i) => `level${i}`).join(' ');
    assert.equal(loadConfig({ STEP_UP_ACR: ten }).stepUp?.acrValues.length, 10);
    assert.deepEqual(problemsOf({ STEP_UP_ACR: `${ten} level10` }), [ACR_PROBLEM]);
    assert.deepEqual(problemsOf({ STEP_UP_ACR: 'say"cheese' }), [ACR_PROBLEM]);
    assert.deepEqual(problemsOf({ STEP_UP_ACR: 'back\\slash' }), [ACR_PROBLEM]);
    assert.deepEqual(problemsOf({ STEP_UP_ACR: 'é' }), [ACR_PROBLEM]);
    assert.equal(loadConfig({ STEP_UP_MAX_AGE_S: '1' }).stepUp?.maxAgeSeconds, 1);
    assert.equal(loadConfig({ STEP_UP_MAX_AGE_S: '86400' }).stepUp?.maxAgeSeconds, 86400);
    assert.equal(problemsOf({ STEP_UP_MAX_AGE_S: '0' }).length, 1);
    assert.equal(problemsOf({ STEP_UP_MAX_AGE_S: '86401' }).length, 1);
    assert.equal(problemsOf({ STEP_UP_MAX_AGE_S: '1.5' }).length, 1);
  });
});

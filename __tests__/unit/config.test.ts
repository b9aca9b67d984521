import assert from 'node:assert/strict';
import { describe, test } from '@jest/globals';
import { ConfigError, loadConfig } from '../../src/config/index.js';
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

  test('SCIM: scope scim with the embedded IdP, off with another issuer until SCIM_TOKEN or SCIM_SCOPE says so', () => {
    const issuer = { OIDC_ISSUER: 'https://id.example.com' };
    assert.deepEqual(loadConfig({}).scim, { enabled: true, scope: 'scim', linkClaim: 'sub', staffGroup: 'staff' });
    assert.deepEqual(loadConfig({ SCIM_SCOPE: 'off' }).scim.enabled, false);
    assert.deepEqual(loadConfig(issuer).scim, { enabled: false, linkClaim: 'sub', staffGroup: 'staff' });
    const token = 'a'.repeat(32);
    assert.deepEqual(loadConfig({ ...issuer, SCIM_TOKEN: token }).scim, {
      enabled: true,
      token,
      linkClaim: 'sub',
      staffGroup: 'staff',
    });
    const entra = loadConfig({
      ...issuer,
      SCIM_SCOPE: 'api://orders/scim',
      SCIM_LINK_CLAIM: 'oid',
      SCIM_STAFF_GROUP: 'Orders Staff',
    });
    assert.deepEqual(entra.scim, {
      enabled: true,
      scope: 'api://orders/scim',
      linkClaim: 'oid',
      staffGroup: 'Orders Staff',
    });
    // The secret is at least 32 characters of a bearer token's alphabet: one past the edge is refused.
    assert.deepEqual(problemsOf({ SCIM_TOKEN: 'a'.repeat(31) }), [
      'SCIM_TOKEN: SCIM_TOKEN must be at least 32 characters (a random secret, e.g. openssl rand -base64 32)',
    ]);
    assert.deepEqual(
      problemsOf({ SCIM_TOKEN: `${'a'.repeat(32)} b`, SCIM_SCOPE: 'two scopes', SCIM_LINK_CLAIM: 'a..b' }),
      [
        'SCIM_TOKEN: SCIM_TOKEN must be a token68 (letters, digits and -._~+/ then optional =)',
        'SCIM_SCOPE: SCIM_SCOPE must be one OAuth scope (no spaces or quotes), or off',
        'SCIM_LINK_CLAIM: SCIM_LINK_CLAIM must be a dotted claim path such as sub, oid or email',
      ],
    );
  });
});

describe('configuration of the HTTP server bounds', () => {
  test('defaults: 30 s for a request, 10 s of body silence, 256 connections per address, 16,384 for trusted proxies', () => {
    assert.deepEqual(loadConfig({}).httpServer, {
      requestTimeoutSeconds: 30,
      bodyIdleTimeoutSeconds: 10,
      maxConnectionsPerIp: 256,
      maxProxyConnections: 16_384,
    });
  });

  test('TRUST_PROXY: true, false, a hop count, or addresses and subnets as Express reads them; anything else is refused', () => {
    assert.equal(loadConfig({ TRUST_PROXY: 'true' }).trustProxy, true);
    assert.equal(loadConfig({ TRUST_PROXY: '2' }).trustProxy, 2);
    assert.deepEqual(loadConfig({ TRUST_PROXY: 'loopback, 10.0.0.0/8' }).trustProxy, ['loopback', '10.0.0.0/8']);
    assert.deepEqual(
      problemsOf({ TRUST_PROXY: '10.0.0.0/99' }).map((p) => p.split(':')[0]),
      ['TRUST_PROXY'],
    );
    assert.deepEqual(
      problemsOf({ TRUST_PROXY: 'nginx' }).map((p) => p.split(':')[0]),
      ['TRUST_PROXY'],
    );
  });

  test('whole seconds and counts from 1; the idle bound no longer than the request bound', () => {
    assert.deepEqual(
      loadConfig({
        REQUEST_TIMEOUT_S: '1',
        BODY_IDLE_TIMEOUT_S: '1',
        HTTP_MAX_CONNECTIONS_PER_IP: '1',
        HTTP_MAX_PROXY_CONNECTIONS: '1',
      }).httpServer,
      { requestTimeoutSeconds: 1, bodyIdleTimeoutSeconds: 1, maxConnectionsPerIp: 1, maxProxyConnections: 1 },
    );
    assert.deepEqual(
      problemsOf({ REQUEST_TIMEOUT_S: '0', BODY_IDLE_TIMEOUT_S: '1.5', HTTP_MAX_CONNECTIONS_PER_IP: 'many' })
        .map((p) => p.split(':')[0])
        .sort(),
      ['BODY_IDLE_TIMEOUT_S', 'HTTP_MAX_CONNECTIONS_PER_IP', 'REQUEST_TIMEOUT_S'],
    );
    assert.deepEqual(problemsOf({ BODY_IDLE_TIMEOUT_S: '31' }), [
      'BODY_IDLE_TIMEOUT_S: must not exceed REQUEST_TIMEOUT_S (a request is cut at that time anyway)',
    ]);
    assert.deepEqual(problemsOf({ REQUEST_TIMEOUT_S: '5' }), [
      'BODY_IDLE_TIMEOUT_S: must not exceed REQUEST_TIMEOUT_S (a request is cut at that time anyway)',
    ]);
  });
});

describe('tracing configuration (OpenTelemetry standard variables)', () => {
  test('off unless an OTLP endpoint is set; an endpoint turns it on with the documented defaults', () => {
    assert.deepEqual(loadConfig({}).tracing, { enabled: false });
    assert.deepEqual(loadConfig({ OTEL_SERVICE_NAME: 'x', OTEL_TRACES_SAMPLER: 'always_on' }).tracing, {
      enabled: false,
    });
    const on = loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318/' }).tracing;
    assert.deepEqual(on, {
      enabled: true,
      url: 'http://collector:4318/v1/traces',
      protocol: 'http/protobuf',
      headers: {},
      timeoutMs: 10_000,
      serviceName: 'orders-api',
      resourceAttributes: {},
      sampler: 'parentbased_always_on',
      ratio: 1,
      batch: { scheduledDelayMs: 5000, exportTimeoutMs: 30_000, maxQueueSize: 2048, maxExportBatchSize: 512 },
      resolverSpans: false,
    });
    assert.deepEqual(
      loadConfig({
        OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318',
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'https://traces.example.com/otlp/spans',
        OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf',
        OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/json',
        OTEL_EXPORTER_OTLP_HEADERS: 'api-key=a%2Cb,x=1',
        OTEL_EXPORTER_OTLP_TRACES_HEADERS: 'x=2',
        OTEL_RESOURCE_ATTRIBUTES: 'deployment.environment.name=prod, team=orders%20team',
        OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
        OTEL_TRACES_SAMPLER_ARG: '0.05',
        OTEL_GRAPHQL_RESOLVER_SPANS: 'true',
      }).tracing,
      {
        enabled: true,
        url: 'https://traces.example.com/otlp/spans',
        protocol: 'http/json',
        headers: { 'api-key': 'a,b', x: '2' },
        timeoutMs: 10_000,
        serviceName: 'orders-api',
        resourceAttributes: { 'deployment.environment.name': 'prod', team: 'orders team' },
        sampler: 'parentbased_traceidratio',
        ratio: 0.05,
        batch: { scheduledDelayMs: 5000, exportTimeoutMs: 30_000, maxQueueSize: 2048, maxExportBatchSize: 512 },
        resolverSpans: true,
      },
    );
    assert.deepEqual(loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_SDK_DISABLED: 'true' }).tracing, {
      enabled: false,
    });
    assert.deepEqual(
      loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_TRACES_EXPORTER: 'none' }).tracing,
      {
        enabled: false,
      },
    );
  });

  test('bad values are reported with the rest', () => {
    assert.deepEqual(
      problemsOf({
        OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4318',
        OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc',
        OTEL_RESOURCE_ATTRIBUTES: 'novalue',
        OTEL_TRACES_SAMPLER: 'jaeger_remote',
        OTEL_TRACES_SAMPLER_ARG: '1.5',
        OTEL_BSP_MAX_QUEUE_SIZE: '10',
        OTEL_BSP_MAX_EXPORT_BATCH_SIZE: '11',
        OTEL_GRAPHQL_RESOLVER_SPANS: 'yes',
        PORT: 'x',
      }),
      [
        'PORT: Invalid input: expected number, received NaN',
        'OTEL_EXPORTER_OTLP_ENDPOINT: OTEL_EXPORTER_OTLP_ENDPOINT must be an http(s) URL without query or fragment',
        'OTEL_EXPORTER_OTLP_PROTOCOL: OTEL_EXPORTER_OTLP_PROTOCOL must be http/protobuf or http/json (gRPC is not built in)',
        'OTEL_RESOURCE_ATTRIBUTES: OTEL_RESOURCE_ATTRIBUTES must be comma-separated key=value pairs (values percent-encoded)',
        'OTEL_TRACES_SAMPLER: OTEL_TRACES_SAMPLER must be one of always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off, parentbased_traceidratio',
        'OTEL_TRACES_SAMPLER_ARG: OTEL_TRACES_SAMPLER_ARG must be a ratio from 0 to 1',
        'OTEL_GRAPHQL_RESOLVER_SPANS: OTEL_GRAPHQL_RESOLVER_SPANS must be true or false',
        'OTEL_BSP_MAX_EXPORT_BATCH_SIZE: must not exceed OTEL_BSP_MAX_QUEUE_SIZE',
      ],
    );
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

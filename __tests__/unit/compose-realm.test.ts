import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, test } from '@jest/globals';
import { ScureBase32Plugin } from 'otplib';
import { parse } from 'yaml';
import { DEMO_TOTP_SECRETS } from '../../src/auth/idp/demoTotp.js';
import { loadConfig } from '../../src/config/index.js';
import { ACR } from '../../src/domain/policy.js';

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
      scope.protocolMappers!.map((m) => [m.protocolMapper, m.config['access.token.claim'], m.config['id.token.claim']]),
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

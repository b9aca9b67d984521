import { randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import { exportJWK, generateKeyPair, type JWK } from 'jose';
import { pino } from 'pino';
import { createEmbeddedIdp, type EmbeddedIdp } from '../../src/auth/embeddedIdp.js';
import type { Database } from '../../src/store/db.js';
import { migrate } from '../../src/store/migrations.js';
import { testDatabase } from './testRun.js';

/**
 * - `genuine`: a well-behaved OpenID provider.
 * - `forged-signature`: the same issuer identifier and key ids, but a second key pair signs the tokens.
 * - `other-issuer`: the genuine keys, but another issuer identifier (`http://localhost:PORT/idp`).
 */
export type IssuerMode = 'genuine' | 'forged-signature' | 'other-issuer';

interface Provider {
  readonly idp: EmbeddedIdp;
  readonly db: Database;
}

/**
 * An external OpenID provider for an app under test, at `http://127.0.0.1:PORT/idp`, that can turn hostile. Each mode
 * is a real oidc-provider (the embedded IdP, each on a database of its own). Discovery and the JWKS always come from
 * the genuine one, as a client that discovered the issuer earlier would have them; in the hostile modes, the
 * authorization endpoint, the sign-in pages and the token endpoint are served by an impostor — an attacker in the
 * middle, or a compromised or mixed-up issuer. The app's own checks are all that stands between it and a session.
 */
export async function startSwitchableIssuer() {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  const url = `http://127.0.0.1:${port}/idp`;

  async function provider(issuer: string, secrets?: { keys: JWK[]; cookieKeys: string[] }): Promise<Provider> {
    const db = await testDatabase();
    await migrate(db);
    if (secrets) {
      await db.query(
        'insert into idp_keys (id, jwks) values (1, $1::jsonb) on conflict (id) do update set jwks = excluded.jwks',
        [JSON.stringify(secrets)],
      );
    }
    const idp = await createEmbeddedIdp({
      issuer,
      // orders-web accepts the /auth/callback of any loopback port, so the app's own URL need not be known yet.
      publicUrl: `http://127.0.0.1:${port}`,
      db,
      audience: 'orders-api',
      trustProxy: false,
      logger: pino({ level: 'silent' }),
    });
    return { idp, db };
  }

  const genuine = await provider(url);
  const [stored] = await genuine.db.query<{ jwks: { keys: JWK[]; cookieKeys: string[] } }>(
    'select jwks from idp_keys where id = 1',
  );
  const genuineSecrets = stored!.jwks;
  // The second key pair keeps the genuine kid, alg and use: only the signature can give it away.
  const forgedKeys = await Promise.all(
    genuineSecrets.keys.map(async (key) => {
      const { privateKey } = await generateKeyPair(key.alg!, { extractable: true });
      return { ...(await exportJWK(privateKey)), kid: key.kid, alg: key.alg, use: key.use };
    }),
  );
  const providers: Record<IssuerMode, Provider> = {
    genuine,
    'forged-signature': await provider(url, { keys: forgedKeys, cookieKeys: [randomBytes(32).toString('base64url')] }),
    'other-issuer': await provider(`http://localhost:${port}/idp`, genuineSecrets),
  };

  let mode: IssuerMode = 'genuine';
  const app = express();
  app.use('/idp', (req, res, next) => {
    const published = req.path === '/.well-known/openid-configuration' || req.path === '/jwks';
    const serving = providers[published ? 'genuine' : mode].idp;
    // An impostor with an identifier of its own serves its pages at its own host (its URLs are pinned to it), so
    // the browser is sent there from the first step and keeps one cookie jar throughout, as with a real one.
    const own = new URL(serving.issuer);
    if (req.method === 'GET' && req.path === '/auth' && req.headers.host !== own.host) {
      return res.redirect(307, `${own.origin}${req.originalUrl}`);
    }
    serving.router(req, res, next);
  });
  server.on('request', app);

  return {
    /** The issuer identifier the app is configured with (OIDC_ISSUER). */
    url,
    /** The identifier the `other-issuer` impostor puts in its responses and tokens. */
    otherIssuer: `http://localhost:${port}/idp`,
    setMode(next: IssuerMode) {
      mode = next;
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      for (const { idp, db } of Object.values(providers)) {
        await idp.close();
        await db.close();
      }
    },
  };
}

export type SwitchableIssuer = Awaited<ReturnType<typeof startSwitchableIssuer>>;

// Prints an access token for a development user, obtained like the mobile app does (authorization code + PKCE):
//   TOKEN=$(npm run --silent token -- --user alice)
import { parseArgs } from 'node:util';
import { decodeJwt } from 'jose';
import { DEMO_TOTP_SECRETS } from '../auth/idp/demoTotp.js';
import { loginWithPkce } from '../auth/pkceLogin.js';
import { ACR } from '../domain/policy.js';

const USAGE = `Usage: npm run --silent token -- --user <name> [--password <password>] [--mfa] [--issuer <url>]

Signs in to the OpenID provider as the mobile app does and prints only the access token.

Options:
  -u, --user <name>          user to sign in as (alice, bob or carol with the embedded IdP)
  -p, --password <password>  password (default: the user name, as for the embedded IdP's demo users)
      --issuer <url>         issuer URL (default: $PUBLIC_URL/idp, else http://localhost:$PORT/idp, PORT=4000)
      --client-id <id>       public client to use (default: orders-mobile)
      --scope <scopes>       scopes to request (default: openid profile email orders:read orders:write)
      --mfa                  sign in with a second factor (acr_values=${ACR.mfa}), as staff changes need; the
                             TOTP step is answered with --totp-secret, or the demo secret of carol
      --totp-secret <base32> the user's TOTP secret, to answer the second-factor step as an authenticator app would
  -h, --help                 show this help
`;

function defaultIssuer(env: NodeJS.ProcessEnv): string {
  const publicUrl = env.PUBLIC_URL?.trim().replace(/\/+$/, '');
  if (publicUrl) return `${publicUrl}/idp`;
  return `http://localhost:${env.PORT?.trim() || '4000'}/idp`;
}

async function main(argv: string[]): Promise<number> {
  let values;
  try {
    ({ values } = parseArgs({
      args: argv,
      strict: true,
      allowPositionals: false,
      options: {
        user: { type: 'string', short: 'u' },
        password: { type: 'string', short: 'p' },
        issuer: { type: 'string' },
        'client-id': { type: 'string' },
        scope: { type: 'string' },
        mfa: { type: 'boolean' },
        'totp-secret': { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
    }));
  } catch (err) {
    process.stderr.write(`token: ${err instanceof Error ? err.message : String(err)}\n\n${USAGE}`);
    return 1;
  }

  if (values.help) {
    process.stdout.write(USAGE);
    return 0;
  }
  if (!values.user) {
    process.stderr.write(`token: --user is required\n\n${USAGE}`);
    return 1;
  }

  const issuer = values.issuer ?? defaultIssuer(process.env);
  const totpSecret = values['totp-secret'] ?? (values.mfa ? DEMO_TOTP_SECRETS[values.user] : undefined);
  try {
    const { accessToken } = await loginWithPkce({
      issuer,
      username: values.user,
      password: values.password ?? values.user,
      clientId: values['client-id'],
      scope: values.scope,
      ...(values.mfa ? { acrValues: ACR.mfa } : {}),
      ...(totpSecret ? { totpSecret } : {}),
    });
    if (values.mfa) {
      // A voluntary acr_values: an account without a second factor is signed in with its password alone.
      const { acr } = decodeJwt(accessToken);
      if (acr !== ACR.mfa) {
        process.stderr.write(
          `token: ${values.user} has no second factor, so this token is not ${ACR.mfa} (acr ${String(acr)}); add one at the IdP's /account page\n`,
        );
      }
    }
    process.stdout.write(`${accessToken}\n`);
    return 0;
  } catch (err) {
    process.stderr.write(`token: ${err instanceof Error ? err.message : String(err)}\n`);
    return 1;
  }
}

process.exitCode = await main(process.argv.slice(2));

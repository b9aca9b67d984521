/**
 * carol's TOTP secret: Base32 of the ASCII `orders-dev-carol-2fa`, enrolled at every start of a development database
 * (and the same raw secret in the compose realm's Keycloak), printed in the README so that `npm run token -- --user
 * carol --mfa` and a person with an authenticator app both work. Development only, like the demo passwords.
 */
export const DEMO_TOTP_SECRETS: Readonly<Record<string, string>> = Object.freeze({
  carol: 'N5ZGIZLSOMWWIZLWFVRWC4TPNQWTEZTB',
});

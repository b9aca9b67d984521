import {
  generateAuthenticationOptions,
  generateRegistrationOptions,
  verifyAuthenticationResponse,
  verifyRegistrationResponse,
  type AuthenticationResponseJSON,
  type PublicKeyCredentialCreationOptionsJSON,
  type PublicKeyCredentialRequestOptionsJSON,
  type RegistrationResponseJSON,
} from '@simplewebauthn/server';
import { decodeClientDataJSON, isoBase64URL } from '@simplewebauthn/server/helpers';
import { z } from 'zod';
import type { Queryable } from '../../store/db.js';
import {
  advanceCounter,
  credentialById,
  credentialsOf,
  insertCredential,
  saveChallenge,
  takeChallenge,
  type WebauthnChallenge,
} from '../../store/idpFactors.js';
import { outcomeOf, passkeyMethods, type SignInOutcome } from './signInMethods.js';

/** The relying party: the IdP's host is the RP ID, its origin the only one a ceremony may come from. */
export interface RelyingParty {
  readonly id: string;
  readonly name: string;
  readonly origin: string;
}

export function relyingPartyOf(issuer: string): RelyingParty {
  const url = new URL(issuer);
  return { id: url.hostname, name: 'Orders API (development)', origin: url.origin };
}

/** A ceremony has five minutes; its challenge is then gone. */
const CEREMONY_SECONDS = 300;
/** Longer than any response an authenticator sends for `none` attestation; larger ones are refused unread. */
export const MAX_RESPONSE_CHARS = 8 * 1024;

const b64url = (max: number) =>
  z
    .string()
    .regex(/^[A-Za-z0-9_-]+$/)
    .max(max);
/** Only the members verification reads, bounded; anything else a client adds is dropped. */
const ResponseShape = z.object({
  id: b64url(1366),
  rawId: b64url(1366),
  type: z.literal('public-key'),
  clientExtensionResults: z.record(z.string(), z.unknown()).catch({}),
  authenticatorAttachment: z.enum(['platform', 'cross-platform']).optional().catch(undefined),
  response: z.looseObject({ clientDataJSON: b64url(4096) }),
});
const AttestationShape = z.object({
  attestationObject: b64url(MAX_RESPONSE_CHARS),
  clientDataJSON: b64url(4096),
  transports: z.array(z.string().max(32)).max(8).optional(),
});
const AssertionShape = z.object({
  authenticatorData: b64url(2048),
  clientDataJSON: b64url(4096),
  // ML-DSA-44 (post-quantum, offered first where Node supports it) signs with 2,420 bytes.
  signature: b64url(6144),
  userHandle: b64url(256).optional(),
});

/** Why a ceremony's answer was refused, in words the page can show. */
export class PasskeyRefused extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'PasskeyRefused';
  }
}

type Parsed<T> = T & { readonly challenge: WebauthnChallenge };

/** Parses the browser's JSON and takes the challenge it answers: gone afterwards, whatever the verdict. */
async function parsedAnswer<T extends z.ZodType>(
  db: Queryable,
  raw: string,
  inner: T,
  purpose: WebauthnChallenge['purpose'],
): Promise<Parsed<{ response: Omit<z.infer<typeof ResponseShape>, 'response'> & { response: z.infer<T> } }>> {
  if (raw.length > MAX_RESPONSE_CHARS) throw new PasskeyRefused('The passkey answer is larger than any passkey sends.');
  let json: unknown;
  try {
    json = JSON.parse(raw);
  } catch {
    throw new PasskeyRefused('The passkey answer is not JSON.');
  }
  const outer = ResponseShape.safeParse(json);
  const body = outer.success ? inner.safeParse(outer.data.response) : undefined;
  if (!outer.success || !body?.success) {
    const issue = outer.success ? body?.error?.issues[0] : outer.error.issues[0];
    const where = issue ? [...(outer.success ? ['response'] : []), ...issue.path].join('.') : '';
    throw new PasskeyRefused(`The passkey answer is not a WebAuthn credential${where ? ` (${where})` : ''}.`);
  }
  let clientChallenge: string;
  try {
    clientChallenge = decodeClientDataJSON(outer.data.response.clientDataJSON).challenge;
  } catch {
    throw new PasskeyRefused('The passkey answer carries no readable client data.');
  }
  const challenge = typeof clientChallenge === 'string' ? await takeChallenge(db, clientChallenge) : undefined;
  if (!challenge || challenge.purpose !== purpose) {
    throw new PasskeyRefused('This passkey answer is for a challenge that has expired or was already used.');
  }
  return { response: { ...outer.data, response: body.data as z.infer<T> }, challenge };
}

/** SimpleWebAuthn's verification; what it throws (wrong origin, RP ID, signature, counter…) is a refusal. */
async function verifiedBy<T extends { verified: boolean }>(verify: () => Promise<T>): Promise<T> {
  let result: T;
  try {
    result = await verify();
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    throw new PasskeyRefused(`The passkey answer could not be verified: ${reason.slice(0, 200)}`);
  }
  if (!result.verified) throw new PasskeyRefused('The passkey answer could not be verified.');
  return result;
}

export function passkeyService(db: Queryable, rp: RelyingParty) {
  return {
    /** Registration options for a signed-in account (a passkey that can sign in alone: resident, user verified). */
    async registrationOptions(user: {
      subject: string;
      username: string;
      name: string;
    }): Promise<PublicKeyCredentialCreationOptionsJSON> {
      const existing = await credentialsOf(db, user.subject);
      const options = await generateRegistrationOptions({
        rpName: rp.name,
        rpID: rp.id,
        userName: user.username,
        userDisplayName: user.name,
        userID: new TextEncoder().encode(user.subject),
        attestationType: 'none',
        timeout: CEREMONY_SECONDS * 1000,
        excludeCredentials: existing.map((c) => ({ id: c.id, transports: c.transports })),
        authenticatorSelection: { residentKey: 'required', userVerification: 'required' },
      });
      await saveChallenge(
        db,
        { challenge: options.challenge, purpose: 'register', subject: user.subject, interaction: null },
        CEREMONY_SECONDS,
      );
      return options;
    },

    /** `bind` runs once the answer has verified, just before it is saved (it may throw to refuse). */
    async register(subject: string, raw: string, bind: () => Promise<void>): Promise<void> {
      const { response, challenge } = await parsedAnswer(db, raw, AttestationShape, 'register');
      if (challenge.subject !== subject) throw new PasskeyRefused('This registration was started by another account.');
      const verified = await verifiedBy(() =>
        verifyRegistrationResponse({
          response: response as RegistrationResponseJSON,
          expectedChallenge: challenge.challenge,
          expectedOrigin: rp.origin,
          expectedRPID: rp.id,
          requireUserVerification: true,
        }),
      );
      if (!verified.registrationInfo) throw new PasskeyRefused('The passkey registration could not be verified.');
      const { credential, credentialDeviceType, credentialBackedUp } = verified.registrationInfo;
      if (await credentialById(db, credential.id)) throw new PasskeyRefused('This passkey is already registered.');
      await bind();
      const saved = await insertCredential(db, {
        id: credential.id,
        subject,
        publicKey: isoBase64URL.fromBuffer(credential.publicKey),
        counter: credential.counter,
        deviceType: credentialDeviceType,
        backedUp: credentialBackedUp,
        transports: response.response.transports ?? [],
      });
      if (!saved) throw new PasskeyRefused('This passkey is already registered.');
    },

    /**
     * Options to sign in with a passkey: alone (any discoverable passkey, its user verified) or as the second factor
     * of `subject` (one of their passkeys). The challenge belongs to this interaction only.
     */
    async authenticationOptions(interaction: string, subject?: string): Promise<PublicKeyCredentialRequestOptionsJSON> {
      const allow = subject ? await credentialsOf(db, subject) : [];
      const options = await generateAuthenticationOptions({
        rpID: rp.id,
        timeout: CEREMONY_SECONDS * 1000,
        userVerification: subject ? 'preferred' : 'required',
        allowCredentials: allow.map((c) => ({ id: c.id, transports: c.transports })),
      });
      await saveChallenge(
        db,
        { challenge: options.challenge, purpose: 'authenticate', subject: subject ?? null, interaction },
        CEREMONY_SECONDS,
      );
      return options;
    },

    /**
     * Verifies an assertion for this interaction: alone it must verify its user; as a second factor it must be
     * `subject`'s. The signature counter must move forward, and is stored only if it still does.
     */
    async authenticate(
      interaction: string,
      raw: string,
      subject?: string,
    ): Promise<{ subject: string; outcome: SignInOutcome; methods: string[] }> {
      const { response, challenge } = await parsedAnswer(db, raw, AssertionShape, 'authenticate');
      if (challenge.interaction !== interaction || (challenge.subject ?? undefined) !== subject) {
        throw new PasskeyRefused('This passkey answer belongs to another sign-in.');
      }
      const credential = await credentialById(db, response.id);
      if (!credential || (subject !== undefined && credential.subject !== subject)) {
        throw new PasskeyRefused('This passkey is not registered for this account.');
      }
      const alone = subject === undefined;
      const verified = await verifiedBy(() =>
        verifyAuthenticationResponse({
          response: response as AuthenticationResponseJSON,
          expectedChallenge: challenge.challenge,
          expectedOrigin: rp.origin,
          expectedRPID: rp.id,
          credential: {
            id: credential.id,
            publicKey: isoBase64URL.toBuffer(credential.publicKey),
            counter: credential.counter,
            transports: credential.transports,
          },
          requireUserVerification: alone,
        }),
      );
      const info = verified.authenticationInfo;
      if (!(await advanceCounter(db, credential.id, credential.counter, info.newCounter))) {
        throw new PasskeyRefused('The passkey signature counter did not move forward: this answer was used before.');
      }
      // simplewebauthn requires user presence: every accepted assertion passed the test.
      const methods = passkeyMethods(info.credentialDeviceType, true);
      return { subject: credential.subject, outcome: outcomeOf(methods, alone && info.userVerified), methods };
    },
  };
}

export type PasskeyService = ReturnType<typeof passkeyService>;

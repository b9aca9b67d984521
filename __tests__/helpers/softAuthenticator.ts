import { createHash, generateKeyPairSync, randomBytes, sign, type KeyObject } from 'node:crypto';
import { isoBase64URL, isoCBOR } from '@simplewebauthn/server/helpers';

/** The parts of WebAuthn options (as the IdP's pages carry them) an authenticator reads. */
interface CreationOptions {
  challenge: string;
  rp: { id: string };
  user: { id: string };
}
interface RequestOptions {
  challenge: string;
  rpId: string;
}

/** What a test may bend, as a hostile or broken client would. */
export interface Bent {
  /** The origin the client data names (a phishing page's). */
  origin?: string;
  /** The RP ID whose hash the authenticator data carries. */
  rpId?: string;
  /** The signature counter to report instead of the next one. */
  counter?: number;
  /** Whether the user was verified (the UV flag). */
  userVerified?: boolean;
  /** A challenge other than the one the options carry. */
  challenge?: string;
}

const FLAG_UP = 0x01;
const FLAG_UV = 0x04;
const FLAG_AT = 0x40;

const sha256 = (data: Uint8Array | string) => createHash('sha256').update(data).digest();
const u32 = (n: number) => {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(n);
  return b;
};

/**
 * A software passkey (ES256, `none` attestation) that answers the IdP's WebAuthn options the way a browser and an
 * authenticator together do — and, unlike them, can be told to lie about the origin, the RP ID or its counter. The
 * browser test uses Chromium's virtual authenticator; this one is for what no honest browser would send.
 */
export class SoftAuthenticator {
  readonly credentialId = randomBytes(16);
  private readonly privateKey: KeyObject;
  private readonly cose: Uint8Array;
  private userHandle?: string;
  counter = 0;

  constructor(readonly origin: string) {
    const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    this.privateKey = privateKey;
    const jwk = publicKey.export({ format: 'jwk' });
    this.cose = isoCBOR.encode(
      new Map<number, number | Uint8Array>([
        [1, 2],
        [3, -7],
        [-1, 1],
        [-2, isoBase64URL.toBuffer(jwk.x!)],
        [-3, isoBase64URL.toBuffer(jwk.y!)],
      ]),
    );
  }

  get id(): string {
    return isoBase64URL.fromBuffer(this.credentialId);
  }

  private clientData(type: string, challenge: string, bent: Bent): string {
    const json = JSON.stringify({
      type,
      challenge: bent.challenge ?? challenge,
      origin: bent.origin ?? this.origin,
      crossOrigin: false,
    });
    return isoBase64URL.fromUTF8String(json);
  }

  /** The PublicKeyCredential as the browser library serialises it. */
  private credential(response: Record<string, unknown>): string {
    const { id } = this;
    return JSON.stringify({
      id,
      rawId: id,
      type: 'public-key',
      clientExtensionResults: {},
      authenticatorAttachment: 'platform',
      response,
    });
  }

  /** navigator.credentials.create(): the registration response, as JSON. `padding` bytes swell the attestation. */
  register(options: CreationOptions, bent: Bent & { padding?: number } = {}): string {
    this.userHandle = options.user.id;
    const idLength = Buffer.alloc(2);
    idLength.writeUInt16BE(this.credentialId.length);
    const authData = Buffer.concat([
      sha256(bent.rpId ?? options.rp.id),
      Buffer.from([FLAG_UP | FLAG_UV | FLAG_AT]),
      u32(this.counter),
      Buffer.alloc(16),
      idLength,
      this.credentialId,
      this.cose,
    ]);
    const attStmt = new Map<string, Uint8Array>(bent.padding ? [['pad', new Uint8Array(bent.padding)]] : []);
    const attestationObject = isoCBOR.encode(
      new Map<string, unknown>([
        ['fmt', 'none'],
        ['attStmt', attStmt],
        ['authData', authData],
      ]) as Map<string, never>,
    );
    return this.credential({
      attestationObject: isoBase64URL.fromBuffer(attestationObject),
      clientDataJSON: this.clientData('webauthn.create', options.challenge, bent),
      transports: ['internal'],
    });
  }

  /** navigator.credentials.get(): an assertion for these options, signed with the next counter value. */
  assert(options: RequestOptions, bent: Bent = {}): string {
    const counter = bent.counter ?? ++this.counter;
    const authData = Buffer.concat([
      sha256(bent.rpId ?? options.rpId),
      Buffer.from([FLAG_UP | (bent.userVerified === false ? 0 : FLAG_UV)]),
      u32(counter),
    ]);
    const clientDataJSON = this.clientData('webauthn.get', options.challenge, bent);
    const signature = sign(
      'sha256',
      Buffer.concat([authData, sha256(isoBase64URL.toBuffer(clientDataJSON))]),
      this.privateKey,
    );
    return this.credential({
      authenticatorData: isoBase64URL.fromBuffer(authData),
      clientDataJSON,
      signature: isoBase64URL.fromBuffer(signature),
      ...(this.userHandle ? { userHandle: this.userHandle } : {}),
    });
  }
}

/** The WebAuthn options a page carries in `<script type="application/json" id="webauthn-options">`. */
export function webauthnOptions<T>(html: string): T {
  const json = /<script type="application\/json" id="webauthn-options">([^<]*)<\/script>/.exec(html)?.[1];
  if (!json) throw new Error('no WebAuthn options on the page');
  return JSON.parse(json) as T;
}

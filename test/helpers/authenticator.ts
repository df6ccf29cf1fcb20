import { createHash, generateKeyPairSync, type KeyObject, randomBytes, sign } from 'node:crypto';
import { isoCBOR } from '@simplewebauthn/server/helpers';

/**
 * A passkey authenticator in software (node:crypto, ES256 on P-256, `none` attestation), answering
 * WebAuthn options the way a browser's navigator.credentials would, as @simplewebauthn/browser serializes
 * them: what API tests sign in with. Its counter can be set, and each answer can claim any origin,
 * challenge or user handle, which is what the refusals are tested with. Browser tests use Chromium's own
 * virtual authenticator instead.
 */

const b64url = (bytes: Uint8Array | Buffer | string) => Buffer.from(bytes).toString('base64url');
const sha256 = (data: Uint8Array | string) => createHash('sha256').update(data).digest();

// authenticatorData flags: user present, user verified, attested credential data included.
const UP = 0x01;
const UV = 0x04;
const AT = 0x40;

interface Overrides {
  origin?: string;
  challenge?: string;
  rpId?: string;
  userVerified?: boolean;
}

export class SoftAuthenticator {
  readonly credentialId = randomBytes(16);
  private readonly privateKey: KeyObject;
  private readonly cosePublicKey: Uint8Array;
  /** The user handle it was registered with (base64url), which each sign-in answers. */
  userHandle = '';
  counter = 0;
  private readonly origin: string;

  constructor(origin = 'http://localhost') {
    this.origin = origin;
    const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    this.privateKey = privateKey;
    const jwk = publicKey.export({ format: 'jwk' });
    // COSE_Key: kty EC2 (2), alg ES256 (-7), crv P-256 (1), x, y.
    this.cosePublicKey = isoCBOR.encode(
      new Map<number, number | Uint8Array>([
        [1, 2],
        [3, -7],
        [-1, 1],
        [-2, Buffer.from(jwk.x as string, 'base64url')],
        [-3, Buffer.from(jwk.y as string, 'base64url')],
      ]),
    );
  }

  get id(): string {
    return b64url(this.credentialId);
  }

  private clientData(type: string, challenge: string, o: Overrides) {
    return Buffer.from(
      JSON.stringify({
        type,
        challenge: o.challenge ?? challenge,
        origin: o.origin ?? this.origin,
        crossOrigin: false,
      }),
    );
  }

  private authData(rpId: string, flags: number, attested?: Uint8Array): Buffer {
    const counter = Buffer.alloc(4);
    counter.writeUInt32BE(this.counter);
    return Buffer.concat([sha256(rpId), Buffer.from([flags]), counter, ...(attested ? [attested] : [])]);
  }

  /** The credential startRegistration would answer for these options. */
  register(options: { challenge: string; rp: { id?: string }; user: { id: string } }, o: Overrides = {}) {
    this.userHandle = options.user.id;
    const clientDataJSON = this.clientData('webauthn.create', options.challenge, o);
    const idLength = Buffer.alloc(2);
    idLength.writeUInt16BE(this.credentialId.length);
    const attested = Buffer.concat([Buffer.alloc(16), idLength, this.credentialId, this.cosePublicKey]);
    const flags = UP | AT | (o.userVerified === false ? 0 : UV);
    const authData = this.authData(o.rpId ?? options.rp.id ?? 'localhost', flags, attested);
    const attestationObject = isoCBOR.encode(
      new Map<string, string | Map<string, string> | Uint8Array>([
        ['fmt', 'none'],
        ['attStmt', new Map<string, string>()],
        ['authData', authData],
      ]),
    );
    return {
      id: this.id,
      rawId: this.id,
      type: 'public-key',
      clientExtensionResults: {},
      response: {
        clientDataJSON: b64url(clientDataJSON),
        attestationObject: b64url(attestationObject),
        transports: ['internal'],
      },
    };
  }

  /** The credential startAuthentication would answer for these options, its counter moved on first. */
  authenticate(options: { challenge: string; rpId?: string }, o: Overrides & { userHandle?: string } = {}) {
    this.counter++;
    return this.assertion(options, o);
  }

  /** An answer at the counter as it stands (what a cloned authenticator, behind, would send). */
  assertion(options: { challenge: string; rpId?: string }, o: Overrides & { userHandle?: string } = {}) {
    const clientDataJSON = this.clientData('webauthn.get', options.challenge, o);
    const flags = UP | (o.userVerified === false ? 0 : UV);
    const authData = this.authData(o.rpId ?? options.rpId ?? 'localhost', flags);
    const signature = sign('sha256', Buffer.concat([authData, sha256(clientDataJSON)]), this.privateKey);
    return {
      id: this.id,
      rawId: this.id,
      type: 'public-key',
      clientExtensionResults: {},
      response: {
        clientDataJSON: b64url(clientDataJSON),
        authenticatorData: b64url(authData),
        signature: b64url(signature),
        userHandle: o.userHandle ?? this.userHandle,
      },
    };
  }
}

/**
 * Passkeys (WebAuthn, docs/access.md). The options Berth answers are what `@simplewebauthn/browser`'s
 * startRegistration / startAuthentication take as `optionsJSON` (open objects: the library may add
 * fields, and they pass through); the credentials the API takes are what those answer, every field
 * named, as every request body here is.
 * @module
 */
import { Type } from 'typebox';
import { CLOSED } from '../../domain/schema-types.ts';
import { DateTime, Nullable, StringEnum, Uuid } from './common.ts';

const OPEN = { additionalProperties: true } as const;
const Base64Url = (description: string) =>
  Type.String({ maxLength: 16384, pattern: '^[A-Za-z0-9_-]*$', description });
const CredentialType = StringEnum(['public-key'] as const);
/** What Berth answers of a credential: the library's descriptor, whose fields it types as strings. */
const Descriptor = Type.Object(
  {
    id: Base64Url('a credential id'),
    type: Type.String({ description: '`public-key`' }),
    transports: Type.Optional(Type.Array(Type.String())),
  },
  OPEN,
);

export const Passkey = Type.Object({
  id: Uuid,
  name: Type.String({ maxLength: 100 }),
  transports: Type.Array(Type.String(), {
    description: 'how the browser reaches its authenticator: `internal`, `usb`, `hybrid`...',
  }),
  created_at: DateTime,
  last_used_at: Nullable(DateTime),
});

export const PasskeyParams = Type.Object({ passkeyId: Uuid });

export const RegistrationOptions = Type.Object(
  {
    challenge: Base64Url('used once, within five minutes'),
    rp: Type.Object({ name: Type.String(), id: Type.Optional(Type.String()) }, OPEN),
    user: Type.Object(
      { id: Base64Url('the user handle'), name: Type.String(), displayName: Type.String() },
      OPEN,
    ),
    pubKeyCredParams: Type.Array(Type.Object({ alg: Type.Number(), type: Type.String() }, OPEN)),
    timeout: Type.Optional(Type.Number()),
    excludeCredentials: Type.Optional(Type.Array(Descriptor)),
    authenticatorSelection: Type.Optional(Type.Object({}, OPEN)),
    attestation: Type.Optional(Type.String()),
    extensions: Type.Optional(Type.Object({}, OPEN)),
    hints: Type.Optional(Type.Array(Type.String())),
  },
  {
    ...OPEN,
    description: "PublicKeyCredentialCreationOptionsJSON: @simplewebauthn/browser's startRegistration",
  },
);

export const AuthenticationOptions = Type.Object(
  {
    challenge: Base64Url('used once, within five minutes'),
    rpId: Type.Optional(Type.String()),
    timeout: Type.Optional(Type.Number()),
    allowCredentials: Type.Optional(Type.Array(Descriptor)),
    userVerification: Type.Optional(Type.String()),
    extensions: Type.Optional(Type.Object({}, OPEN)),
    hints: Type.Optional(Type.Array(Type.String())),
  },
  {
    ...OPEN,
    description: "PublicKeyCredentialRequestOptionsJSON: @simplewebauthn/browser's startAuthentication",
  },
);

const credentialFields = {
  id: Base64Url('the credential id'),
  rawId: Base64Url('the credential id'),
  type: CredentialType,
  authenticatorAttachment: Type.Optional(StringEnum(['platform', 'cross-platform'] as const)),
  // The outputs of the one extension Berth asks for (credProps): the console sends only that.
  clientExtensionResults: Type.Object(
    { credProps: Type.Optional(Type.Object({ rk: Type.Optional(Type.Boolean()) }, CLOSED)) },
    CLOSED,
  ),
};

/** RegistrationResponseJSON: what startRegistration answers. */
export const RegistrationCredential = Type.Object(
  {
    ...credentialFields,
    response: Type.Object(
      {
        clientDataJSON: Base64Url('the client data'),
        attestationObject: Base64Url('the attestation object'),
        authenticatorData: Type.Optional(Base64Url('the authenticator data')),
        transports: Type.Optional(
          Type.Array(Type.String({ maxLength: 40 }), {
            maxItems: 10,
            description: 'how the browser may reach the authenticator: `internal`, `usb`, `hybrid`...',
          }),
        ),
        publicKeyAlgorithm: Type.Optional(Type.Number()),
        publicKey: Type.Optional(Base64Url('the public key')),
      },
      CLOSED,
    ),
  },
  CLOSED,
);

/** AuthenticationResponseJSON: what startAuthentication answers. */
export const AuthenticationCredential = Type.Object(
  {
    ...credentialFields,
    response: Type.Object(
      {
        clientDataJSON: Base64Url('the client data'),
        authenticatorData: Base64Url('the authenticator data'),
        signature: Base64Url('the signature'),
        userHandle: Type.Optional(Base64Url('the user handle')),
      },
      CLOSED,
    ),
  },
  CLOSED,
);

export const RegisterPasskeyBody = Type.Object(
  {
    name: Type.Optional(
      Type.String({ minLength: 1, maxLength: 100, description: 'what the list shows; `Passkey` by default' }),
    ),
    credential: RegistrationCredential,
  },
  CLOSED,
);

export const PasskeySignInBody = Type.Object(
  {
    credential: AuthenticationCredential,
    account_id: Type.Optional(Uuid),
  },
  CLOSED,
);

import { Type } from 'typebox';
import { CLOSED } from '../../domain/schema-types.ts';
import { DateTime, Nullable, StringEnum, Uuid } from './common.ts';

/** RFC 8628 §3.1: the device authorization request (JSON, or form-encoded as the RFC sends it). */
export const DeviceCodeBody = Type.Object(
  {
    client_id: Type.String({
      minLength: 1,
      maxLength: 100,
      description: 'who asks (berth-cli for berth login); the poll must send the same',
    }),
    device_name: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 60,
        pattern: '^[^\\u0000-\\u001f\\u007f]+$',
        description: 'the machine, as the client names it: shown to the approver and in the token name',
      }),
    ),
  },
  CLOSED,
);

/** RFC 8628 §3.2: the device authorization response. */
export const DeviceCode = Type.Object({
  device_code: Type.String({ maxLength: 100, description: 'the secret the client polls with' }),
  user_code: Type.String({ maxLength: 9, description: 'what the person approves: XXXX-XXXX' }),
  verification_uri: Type.String({ maxLength: 2000 }),
  verification_uri_complete: Type.String({ maxLength: 2000 }),
  expires_in: Type.Integer({ description: 'seconds' }),
  interval: Type.Integer({ description: 'seconds to wait between polls' }),
});

/** RFC 8628 §3.4: the device access token request. */
export const DeviceTokenBody = Type.Object(
  {
    grant_type: Type.String({
      minLength: 1,
      maxLength: 200,
      description: 'urn:ietf:params:oauth:grant-type:device_code (anything else: unsupported_grant_type)',
    }),
    device_code: Type.String({ minLength: 1, maxLength: 100 }),
    client_id: Type.String({ minLength: 1, maxLength: 100 }),
  },
  CLOSED,
);

/** RFC 6749 §5.1, with what the client shows the person. */
export const DeviceToken = Type.Object({
  access_token: Uuid,
  token_type: Type.Literal('Bearer'),
  token_id: Uuid,
  account_id: Uuid,
  role: Type.String({ maxLength: 20 }),
  email: Type.String({ maxLength: 254 }),
});

export const OAUTH_ERRORS = [
  'invalid_request',
  'invalid_grant',
  'unsupported_grant_type',
  'authorization_pending',
  'slow_down',
  'access_denied',
  'expired_token',
  'server_error',
] as const;

/** RFC 6749 §5.2: how both endpoints answer an error. */
export const OAuthError = Type.Object({
  error: StringEnum(OAUTH_ERRORS),
  error_description: Type.String({ maxLength: 1000 }),
});

/** A device login as the person approving it sees it. */
export const DeviceLogin = Type.Object({
  user_code: Type.String({ maxLength: 9 }),
  client_id: Type.String({ maxLength: 100 }),
  device_name: Nullable(Type.String({ maxLength: 60 })),
  client_address: Nullable(Type.String({ maxLength: 100, description: 'where the client asked from' })),
  user_agent: Nullable(Type.String({ maxLength: 400 })),
  created_at: DateTime,
  expires_at: DateTime,
  state: StringEnum(['pending', 'approved', 'denied'] as const),
});

/** Anything that cannot be a user code is not found, before anything else is looked at. */
export const DeviceLoginParams = Type.Object({
  userCode: Type.String({
    pattern: '^[A-Za-z]{4}-?[A-Za-z]{4}$',
    maxLength: 9,
    description: 'XXXX-XXXX (any case, dash optional)',
  }),
});

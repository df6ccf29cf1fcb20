/**
 * What single sign-on's use cases take (usecases/single-sign-on.ts), declared once as schemas, as in
 * inputs.ts: the API validates and documents request bodies with them.
 * @module
 */
import { type Static, Type } from 'typebox';
import { ROLES } from './roles.ts';
import { CLOSED, StringEnum, Uuid } from './schema-types.ts';

export const SsoSettingsBody = Type.Object(
  {
    issuer_url: Type.String({
      minLength: 1,
      maxLength: 500,
      description:
        "the provider's issuer: https:// (http:// only on localhost); discovery reads <issuer>/.well-known/openid-configuration",
    }),
    client_id: Type.String({ minLength: 1, maxLength: 500 }),
    client_secret: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 2000,
        description:
          'write-only (sealed, never shown); required the first time, absent later: the stored one stays',
      }),
    ),
    allowed_domains: Type.Array(Type.String({ minLength: 1, maxLength: 253 }), {
      minItems: 1,
      maxItems: 50,
      description: 'email domains that sign in (exactly: example.com does not take sub.example.com)',
    }),
    default_role: StringEnum(ROLES, {
      description: "a new member's role on their first sign-in (not owner)",
    }),
    enabled: Type.Boolean(),
  },
  CLOSED,
);
export type SsoSettings = Static<typeof SsoSettingsBody>;

export const SsoStartBody = Type.Object(
  {
    email: Type.String({ minLength: 3, maxLength: 254, description: 'its domain picks the account' }),
    account_id: Type.Optional(Uuid),
  },
  CLOSED,
);
export type SsoStart = Static<typeof SsoStartBody>;

export const SsoCallbackBody = Type.Object(
  {
    account_id: Uuid,
    state: Type.String({ minLength: 1, maxLength: 500 }),
    code: Type.Optional(Type.String({ minLength: 1, maxLength: 4000 })),
    iss: Type.Optional(Type.String({ minLength: 1, maxLength: 500 })),
    error: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
    error_description: Type.Optional(Type.String({ maxLength: 500 })),
  },
  {
    ...CLOSED,
    description:
      "the query parameters the provider sent the browser back with, and the account from the callback's path",
  },
);
export type SsoCallback = Static<typeof SsoCallbackBody>;

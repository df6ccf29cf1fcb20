import { Type } from 'typebox';
import { ROLES } from '../../domain/roles.ts';
import { DateTime, StringEnum } from './common.ts';

/** An account's single sign-on settings as read: the client secret is never shown. */
export const SsoSettingsView = Type.Object({
  issuer_url: Type.String({ maxLength: 500 }),
  client_id: Type.String({ maxLength: 500 }),
  client_secret_set: Type.Boolean({
    description: 'always true: the secret is stored sealed and never shown',
  }),
  allowed_domains: Type.Array(Type.String({ maxLength: 253 }), { maxItems: 50 }),
  default_role: StringEnum(ROLES),
  enabled: Type.Boolean(),
  updated_at: DateTime,
  redirect_uri: Type.String({
    maxLength: 600,
    description:
      "register it at the provider: where it sends the browser back (this server's address as you reach it)",
  }),
  sign_in_url: Type.String({
    maxLength: 600,
    description:
      "the console's sign-in page naming this account, for when several accounts take the same domain",
  }),
});

export const SsoStarted = Type.Object({
  authorization_url: Type.String({ description: "the provider's sign-in page: send the browser there" }),
  account_id: Type.String({ format: 'uuid' }),
});

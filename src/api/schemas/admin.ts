import { Type } from 'typebox';
import { GIT_KINDS, type GitConnectionInput } from '../../domain/inputs.ts';
import { PLANS } from '../../domain/plans.ts';
import { ROLES } from '../../domain/roles.ts';
import { DateTime, Nullable, StringEnum, Uuid } from './common.ts';

export const Account = Type.Object({
  id: Uuid,
  name: Type.String({ maxLength: 100 }),
  plan: StringEnum(PLANS),
  features: Type.Array(Type.String({ maxLength: 40 })),
  created_at: DateTime,
  updated_at: DateTime,
});

/** An API token as the operator sees it: never the token or its hash (shown once, when issued). */
export const ApiToken = Type.Object({
  id: Uuid,
  account_id: Uuid,
  created_at: DateTime,
  revoked_at: Nullable(DateTime),
});

/** A git connection as the operator sees it: never its private key, token or webhook secret. */
export const GitConnection = Type.Object({
  id: Uuid,
  account_id: Uuid,
  kind: StringEnum(GIT_KINDS),
  name: Type.String({ maxLength: 100 }),
  base_url: Type.String({ maxLength: 300 }),
  credential: StringEnum(['github_app', 'token'] as const),
  github_app_id: Nullable(Type.String({ maxLength: 20 })),
  github_installation_id: Nullable(Type.String({ maxLength: 20 })),
  webhook_path: Type.String({
    maxLength: 100,
    description: "where the host sends this connection's webhooks, under Berth's URL: /hooks/{kind}/{id}",
  }),
  created_at: DateTime,
  updated_at: DateTime,
});

/** What creating a connection takes (the body schema is declared in domain/inputs.ts). */
export type GitConnectionRequest = GitConnectionInput;

/** What a master key rotation did (POST /admin/v1/master-key/rotate). */
export const MasterKeyRotation = Type.Object({
  key_id: Type.String({ maxLength: 12, description: 'the id of the key every value is sealed with now' }),
  resealed: Type.Integer({ minimum: 0, description: 'values this run re-sealed' }),
  retired_key_ids: Type.Array(Type.String({ maxLength: 12 }), {
    description: 'keys no value is sealed with any more: no process needs them now',
  }),
});

/** A person; members of accounts through memberships (docs/access.md). */
export const User = Type.Object({
  id: Uuid,
  email: Type.String({ maxLength: 254 }),
  display_name: Type.String({ maxLength: 100 }),
  created_at: DateTime,
});

/** A user's membership of an account. */
export const Member = Type.Object({
  user_id: Uuid,
  email: Type.String({ maxLength: 254 }),
  display_name: Type.String({ maxLength: 100 }),
  role: StringEnum(ROLES),
  environment_ids: Nullable(Type.Array(Uuid, { maxItems: 100 })),
  created_at: DateTime,
});

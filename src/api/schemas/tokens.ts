import { Type } from 'typebox';
import { ROLES } from '../../domain/roles.ts';
import { DateTime, Nullable, StringEnum, Uuid } from './common.ts';

/** A token as its account's admins see it: never the token or its hash (shown once, when made). */
export const Token = Type.Object({
  id: Uuid,
  name: Nullable(Type.String({ maxLength: 100, description: 'null for tokens the operator issued' })),
  role: StringEnum(ROLES, {
    description: "what it may do (docs/access.md); a member's token never does more than the member",
  }),
  owner: Nullable(
    Type.Object(
      { user_id: Uuid, email: Type.String({ maxLength: 254 }) },
      {
        description: 'the member who made it; null for operator-issued tokens and tokens made with them',
      },
    ),
  ),
  environment_ids: Nullable(
    Type.Array(Uuid, { maxItems: 100, description: 'the environments it may reach; null: every one' }),
  ),
  read_only: Type.Boolean(),
  expires_at: Nullable(DateTime),
  last_used_at: Nullable(DateTime),
  created_at: DateTime,
  revoked_at: Nullable(DateTime),
  current: Type.Boolean({
    description: 'the token this request was made with: revoking it signs its caller out',
  }),
});

export const CreatedToken = Type.Object({
  ...Token.properties,
  token: Uuid,
});

export const TokenParams = Type.Object({ tokenId: Uuid });

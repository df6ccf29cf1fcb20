import { Type } from 'typebox';
import { ROLES } from '../../domain/roles.ts';
import { CLOSED } from '../../domain/schema-types.ts';
import { DateTime, Nullable, StringEnum, Uuid } from './common.ts';

export const Session = Type.Object({
  id: Uuid,
  account_id: Uuid,
  created_at: DateTime,
  last_seen_at: DateTime,
  expires_at: Type.String({ format: 'date-time', description: 'the absolute expiry (idle ones end sooner)' }),
  user_agent: Nullable(Type.String({ maxLength: 400 })),
  client_address: Nullable(Type.String({ maxLength: 100 })),
  current: Type.Boolean({ description: 'the session this request was made with' }),
});

export const SessionParams = Type.Object({ sessionId: Uuid });

/** What a browser learns when it signs in, and from GET /auth/session. */
export const SignedIn = Type.Object({
  session_id: Uuid,
  csrf_token: Type.String({ description: 'send it in the X-CSRF-Token header with every write' }),
  user: Type.Object({ id: Uuid, email: Type.String({ maxLength: 254 }) }),
  account_id: Uuid,
  role: StringEnum(ROLES),
});

export const SignInBody = Type.Object(
  {
    email: Type.String({ minLength: 1, maxLength: 254 }),
    password: Type.String({ minLength: 1, maxLength: 1024 }),
    account_id: Type.Optional(Uuid),
  },
  CLOSED,
);

export const SignInLinkBody = Type.Object(
  {
    token: Type.String({ minLength: 1, maxLength: 100 }),
    password: Type.Optional(
      Type.String({ maxLength: 1024, description: 'sets the password (12 to 256 characters)' }),
    ),
  },
  CLOSED,
);

export const InvitationBody = Type.Object(
  {
    email: Type.String({ format: 'email', minLength: 3, maxLength: 254 }),
    role: StringEnum(ROLES, { description: "at most the inviter's own role" }),
  },
  CLOSED,
);

export const Invitation = Type.Object({
  id: Uuid,
  email: Type.String({ maxLength: 254 }),
  role: StringEnum(ROLES),
  expires_at: DateTime,
  token: Type.String({ description: 'shown only in this response' }),
  path: Type.String({ description: 'where the console accepts it, relative to this server' }),
  mailed: Type.Boolean({ description: 'whether Berth sent it by mail (BERTH_SMTP_URL)' }),
});

/** An invitation waiting to be accepted, as the account's admins list it: never its link. */
export const PendingInvitation = Type.Object({
  id: Uuid,
  email: Type.String({ maxLength: 254 }),
  role: StringEnum(ROLES),
  invited_by: Nullable(
    Type.Object(
      { user_id: Uuid, email: Type.String({ maxLength: 254 }) },
      { description: 'the member who invited; null when an operator-issued token did' },
    ),
  ),
  created_at: DateTime,
  expires_at: DateTime,
});

export const InvitationParams = Type.Object({ invitationId: Uuid });

export const AcceptInvitationBody = Type.Object(
  {
    token: Type.String({ minLength: 1, maxLength: 100 }),
    password: Type.String({
      minLength: 1,
      maxLength: 1024,
      description: "a new user's password (12 to 256 characters), or an existing user's own",
    }),
    display_name: Type.Optional(Type.String({ minLength: 1, maxLength: 100 })),
  },
  CLOSED,
);

export const Member = Type.Object({
  user_id: Uuid,
  email: Type.String({ maxLength: 254 }),
  display_name: Type.String({ maxLength: 100 }),
  role: StringEnum(ROLES),
  environment_ids: Nullable(Type.Array(Uuid, { maxItems: 100 })),
  created_at: DateTime,
});

export const MemberParams = Type.Object({ userId: Uuid });

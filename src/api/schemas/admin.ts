import { Type } from 'typebox';
import { PLANS } from '../../domain/plans.ts';
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

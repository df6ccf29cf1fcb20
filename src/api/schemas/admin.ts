import { Type } from 'typebox';
import { FEATURES, PLANS } from '../../domain/plans.ts';
import { DateTime, StringEnum, Uuid } from './common.ts';

export const Account = Type.Object({
  id: Uuid,
  name: Type.String({ maxLength: 100 }),
  plan: StringEnum(PLANS),
  features: Type.Array(Type.String({ maxLength: 40 })),
  created_at: DateTime,
  updated_at: DateTime,
});

export const Features = Type.Array(StringEnum(FEATURES), { maxItems: FEATURES.length, uniqueItems: true });

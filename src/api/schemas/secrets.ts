import { Type } from 'typebox';
import { DateTime, Nullable } from './common.ts';

const secretFields = {
  key: Type.String({
    maxLength: 256,
    description:
      'non-empty after trimming; unique within the array; an environment variable name after trimming (letters, digits and underscores, not starting with a digit)',
  }),
  value: Type.String({ maxLength: 65_536 }),
  description: Type.String({ maxLength: 1000 }),
  use_preview: Type.Boolean({ description: 'also inject into preview services of this service' }),
  is_sensitive: Type.Boolean({ description: 'write-only: reads leave value out' }),
  expose_to_chart: Nullable(Type.Boolean()),
  chart_default_val: Nullable(Type.String({ maxLength: 65_536 })),
  dep_export: Nullable(Type.Boolean()),
};

export const SecretInput = Type.Object({
  key: secretFields.key,
  value: Type.Optional(secretFields.value),
  description: Type.Optional(secretFields.description),
  use_preview: Type.Optional(secretFields.use_preview),
  is_sensitive: Type.Optional(secretFields.is_sensitive),
  expose_to_chart: Type.Optional(secretFields.expose_to_chart),
  chart_default_val: Type.Optional(secretFields.chart_default_val),
  dep_export: Type.Optional(secretFields.dep_export),
});

export const Secret = Type.Object({
  key: secretFields.key,
  value: Type.Optional(secretFields.value),
  description: secretFields.description,
  use_preview: secretFields.use_preview,
  is_sensitive: secretFields.is_sensitive,
  expose_to_chart: secretFields.expose_to_chart,
  chart_default_val: secretFields.chart_default_val,
  dep_export: secretFields.dep_export,
  updated_at: DateTime,
});

export const SecretsBody = Type.Object({ secrets: Type.Array(SecretInput, { maxItems: 500 }) });
export const SecretsData = Type.Object({ secrets: Type.Array(Secret) });

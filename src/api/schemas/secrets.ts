import { Type } from 'typebox';
import { SECRET_FIELDS, SecretInput, SecretsBody } from '../../domain/inputs.ts';
import { DateTime } from './common.ts';

export { SecretInput, SecretsBody };

export const Secret = Type.Object({
  key: SECRET_FIELDS.key,
  value: Type.Optional(SECRET_FIELDS.value),
  description: SECRET_FIELDS.description,
  use_preview: SECRET_FIELDS.use_preview,
  is_sensitive: SECRET_FIELDS.is_sensitive,
  expose_to_chart: SECRET_FIELDS.expose_to_chart,
  chart_default_val: SECRET_FIELDS.chart_default_val,
  dep_export: SECRET_FIELDS.dep_export,
  updated_at: DateTime,
});

export const SecretsData = Type.Object({ secrets: Type.Array(Secret) });

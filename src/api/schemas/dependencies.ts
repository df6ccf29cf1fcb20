import { Type } from 'typebox';
import { DateTime, Nullable, StringEnum } from './common.ts';

/** One ops.json dependency of a service, as the provider made it. Never its password. */
export const ServiceDependency = Type.Object({
  kind: Type.String({
    maxLength: 100,
    description: 'the key it is declared under, e.g. `s3`, `rds` (an open set)',
  }),
  type: Type.String({ maxLength: 100, description: 'its resource type, e.g. `buckets`, `instances`' }),
  id: Type.String({ maxLength: 100 }),
  prefix: Type.String({ maxLength: 100 }),
  state: StringEnum(['provisioning', 'available', 'failed', 'deleting'] as const, { maxLength: 20 }),
  attributes: Type.Record(Type.String({ maxLength: 100 }), Type.String({ maxLength: 1000 }), {
    description: 'resolved `$...` attributes by name (without `$`); a password is never among them',
  }),
  error: Type.String({ maxLength: 2000, description: 'why it could not be made; empty when it was' }),
  provisioned_at: Nullable(DateTime),
});

export const ServiceDependenciesData = Type.Object({ dependencies: Type.Array(ServiceDependency) });

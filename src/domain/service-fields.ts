/**
 * A service's configurable fields, declared once. Each entry gives the field's JSON Schema (the API
 * validates and documents it), its unset value (absent for the two every service has) and the sources
 * it belongs to (absent: every source). The rest is derived: ServiceSpec, SPEC_FIELDS, EMPTY_SPEC,
 * FIELD_SOURCES, the create and patch body schemas, and the `services` table's row type. Adding a field
 * is one entry here plus a migration adding its column.
 * @module
 */
import { type Static, type TSchema, Type } from 'typebox';
import { Nullable, StringEnum, Uuid } from './schema-types.ts';

export const SERVICE_TYPES = ['web', 'internal', 'worker', 'cron', 'job'] as const;
export const SOURCES = ['github', 'gitlab', 'docker_image', 'helm_chart'] as const;
export type ServiceType = (typeof SERVICE_TYPES)[number];
export type Source = (typeof SOURCES)[number];

const GIT: readonly Source[] = ['github', 'gitlab'];
const ShortText = (description: string) => Type.String({ maxLength: 100, description });
const LongText = (description: string) => Type.String({ maxLength: 262_144, description });

export const SERVICE_FIELDS = {
  name: {
    schema: Type.String({
      maxLength: 50,
      description: '3 to 50 characters; letters and spaces only (patch: hyphens too)',
    }),
  },
  type: {
    schema: Nullable(StringEnum(SERVICE_TYPES, { description: 'drives which other fields are required' })),
    unset: null,
  },
  source: { schema: StringEnum(SOURCES) },
  port: {
    schema: Nullable(
      Type.Integer({ minimum: 1, maximum: 65535, description: 'required when type is web or internal' }),
    ),
    unset: null,
  },
  cron_schedule: {
    schema: Nullable(Type.String({ maxLength: 100, description: 'required when type is cron' })),
    unset: null,
  },
  replica_count: {
    schema: Nullable(
      Type.Integer({ minimum: 0, maximum: 1000, description: 'required unless source is helm_chart' }),
    ),
    unset: null,
  },
  cpu_count_min: {
    schema: Nullable(
      Type.Number({ exclusiveMinimum: 0, maximum: 512, description: 'required unless source is helm_chart' }),
    ),
    unset: null,
  },
  cpu_count_max: { schema: Nullable(Type.Number({ exclusiveMinimum: 0, maximum: 512 })), unset: null },
  memory_mb_min: {
    schema: Nullable(
      Type.Integer({ minimum: 1, maximum: 4_194_304, description: 'required unless source is helm_chart' }),
    ),
    unset: null,
  },
  memory_mb_max: { schema: Nullable(Type.Integer({ minimum: 1, maximum: 4_194_304 })), unset: null },
  prov_node_group_id: { schema: Nullable(Uuid), unset: null },
  is_protected: {
    schema: Type.Boolean({
      description: 'when true the service cannot be deleted until protection is removed',
    }),
    unset: false,
  },
  installation_id: { schema: Nullable(Uuid), unset: null, sources: GIT },
  git_repo_full_name: {
    schema: Nullable(
      Type.String({ maxLength: 200, description: 'required for github and gitlab; org/repo' }),
    ),
    unset: null,
    sources: GIT,
  },
  git_repo_branch: {
    schema: Nullable(ShortText('required for github and gitlab')),
    unset: null,
    sources: GIT,
  },
  auto_deploy: {
    schema: Nullable(Type.Boolean({ description: 'git sources only; not with type job' })),
    unset: null,
    sources: GIT,
  },
  dockerfile_path: { schema: Nullable(ShortText('git sources only; trimmed')), unset: null, sources: GIT },
  build_context: {
    schema: Nullable(ShortText('git sources only; trimmed; blank is unset')),
    unset: null,
    sources: GIT,
  },
  run_command: {
    schema: Nullable(ShortText('git and docker_image sources')),
    unset: null,
    sources: ['github', 'gitlab', 'docker_image'],
  },
  ops_json_path: { schema: Nullable(ShortText('git sources only; trimmed')), unset: null, sources: GIT },
  // Its source rule is the spec's rule 5 (a 500), checked apart: see service-rules.ts.
  ops_json: { schema: Nullable(LongText('inline ops.json; docker_image source only')), unset: null },
  enable_previews: {
    schema: Type.Boolean({ description: 'github only; type web only' }),
    unset: false,
    sources: ['github'],
  },
  enable_code_review: {
    schema: Type.Boolean({ description: 'github only' }),
    unset: false,
    sources: ['github'],
  },
  docker_registry: {
    schema: Nullable(ShortText('docker_image source')),
    unset: null,
    sources: ['docker_image'],
  },
  docker_image: {
    schema: Nullable(ShortText('required for docker_image')),
    unset: null,
    sources: ['docker_image'],
  },
  helm_chart_repo: {
    schema: Nullable(ShortText('required for helm_chart')),
    unset: null,
    sources: ['helm_chart'],
  },
  helm_chart_name: {
    schema: Nullable(ShortText('required for helm_chart')),
    unset: null,
    sources: ['helm_chart'],
  },
  helm_values_yml: {
    schema: Nullable(LongText('contents of values.yaml')),
    unset: null,
    sources: ['helm_chart'],
  },
} satisfies Record<string, FieldDeclaration>;

interface FieldDeclaration {
  schema: TSchema;
  unset?: null | false;
  sources?: readonly Source[];
}

type Fields = typeof SERVICE_FIELDS;
export type SpecField = keyof Fields;

/** The configurable fields of a service, as stored. Unset is null (false for flags). */
export type ServiceSpec = { [K in SpecField]: Static<Fields[K]['schema']> };
export type SpecInput = { [K in SpecField]?: ServiceSpec[K] | null | undefined };

/** The fields a service may leave unset. */
export type OptionalSpec = Omit<ServiceSpec, 'name' | 'source'>;

export const SPEC_FIELDS = Object.keys(SERVICE_FIELDS) as SpecField[];

/** Each field's schema, for the create and patch bodies. */
export const SPEC_SCHEMAS = Object.fromEntries(SPEC_FIELDS.map((f) => [f, SERVICE_FIELDS[f].schema])) as {
  [K in SpecField]: Fields[K]['schema'];
};

const DECLARATIONS: Record<SpecField, FieldDeclaration> = SERVICE_FIELDS;

export const EMPTY_SPEC = Object.fromEntries(
  SPEC_FIELDS.flatMap((f) => {
    const { unset } = DECLARATIONS[f];
    return unset === undefined ? [] : [[f, unset]];
  }),
) as OptionalSpec;

/** Which sources each source-bound field belongs to; a field set for another source is an error. */
export const FIELD_SOURCES: Partial<Record<SpecField, readonly Source[]>> = Object.fromEntries(
  SPEC_FIELDS.flatMap((f) => {
    const { sources } = DECLARATIONS[f];
    return sources ? [[f, sources]] : [];
  }),
);

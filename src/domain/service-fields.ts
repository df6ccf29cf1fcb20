/**
 * A service's configurable fields, declared once. Each entry gives the field's JSON Schema (the API
 * validates and documents it), its unset value (absent for the two every service has), the sources
 * it belongs to (absent: every source) and how a read shows it (absent: always, null when unset). The
 * rest is derived: ServiceSpec, SPEC_FIELDS, EMPTY_SPEC, FIELD_SOURCES, the create and patch body
 * schemas, the fields of the Service response schema and of its view (SPEC_VIEW_SCHEMAS, specView),
 * and the `services` table's row type. Adding a field is one entry here plus a migration adding its
 * column (see README.md).
 * @module
 */
import { type Static, type TOptional, type TSchema, type TUnsafe, Type } from 'typebox';
import { Nullable, StringEnum, Uuid } from './schema-types.ts';

export const SERVICE_TYPES = ['web', 'internal', 'worker', 'cron', 'job'] as const;
export const SOURCES = ['github', 'gitlab', 'docker_image', 'helm_chart'] as const;
export type ServiceType = (typeof SERVICE_TYPES)[number];
export type Source = (typeof SOURCES)[number];

const GIT: readonly Source[] = ['github', 'gitlab'];

/** Whether the service builds from a repository. */
export const isGitSource = (source: Source): boolean => GIT.includes(source);
const ShortText = (description: string) => Type.String({ maxLength: 100, description });
/** The longest inline document a field takes (ops_json, helm values): 256 KiB. */
export const LONG_TEXT_MAX = 262_144;
const LongText = (description: string) => Type.String({ maxLength: LONG_TEXT_MAX, description });

/**
 * The least CPU a service may ask for: Docker takes no less than 0.01 CPUs, and a smaller value (1e-10)
 * rounds to 0 nanocpus, which Docker reads as no limit at all.
 */
const CPU_MIN = 0.01;

export const SERVICE_FIELDS = {
  name: {
    schema: Type.String({
      maxLength: 50,
      description: '3 to 50 characters; letters and spaces only (patch: hyphens too)',
    }),
    // A preview service's name is its parent's and the pull request's: a read shows more than 50.
    view: Type.String({ maxLength: 100 }),
  },
  type: {
    schema: Nullable(StringEnum(SERVICE_TYPES, { description: 'drives which other fields are required' })),
    unset: null,
    view: Nullable(StringEnum(SERVICE_TYPES, { maxLength: 20 })),
  },
  source: { schema: StringEnum(SOURCES), view: StringEnum(SOURCES, { maxLength: 20 }) },
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
      Type.Number({
        minimum: CPU_MIN,
        maximum: 512,
        description: 'CPUs, 0.01 to 512; required unless source is helm_chart',
      }),
    ),
    unset: null,
    shown: 'omitted',
  },
  cpu_count_max: {
    schema: Nullable(Type.Number({ minimum: CPU_MIN, maximum: 512, description: 'CPUs, 0.01 to 512' })),
    unset: null,
    shown: 'omitted',
  },
  memory_mb_min: {
    schema: Nullable(
      Type.Integer({ minimum: 1, maximum: 4_194_304, description: 'required unless source is helm_chart' }),
    ),
    unset: null,
    shown: 'omitted',
  },
  memory_mb_max: {
    schema: Nullable(Type.Integer({ minimum: 1, maximum: 4_194_304 })),
    unset: null,
    shown: 'omitted',
  },
  prov_node_group_id: { schema: Nullable(Uuid), unset: null },
  is_protected: {
    schema: Type.Boolean({
      description: 'when true the service cannot be deleted until protection is removed',
    }),
    unset: false,
  },
  installation_id: {
    schema: Nullable(Uuid),
    unset: null,
    // The connection a service uses is not a secret: a read shows it (a gitlab service's also as
    // gitlab_connection_id, the hosted schema's name).
    shown: 'omitted',
    sources: GIT,
  },
  git_repo_full_name: {
    schema: Nullable(
      Type.String({ maxLength: 200, description: 'required for github and gitlab; org/repo' }),
    ),
    unset: null,
    shown: 'omitted',
    sources: GIT,
  },
  git_repo_branch: {
    schema: Nullable(ShortText('required for github and gitlab')),
    unset: null,
    shown: 'omitted',
    sources: GIT,
  },
  auto_deploy: {
    schema: Nullable(Type.Boolean({ description: 'git sources only; not with type job' })),
    unset: null,
    shown: 'omitted',
    sources: GIT,
  },
  dockerfile_path: {
    schema: Nullable(ShortText('git sources only; trimmed')),
    unset: null,
    shown: 'omitted',
    sources: GIT,
  },
  build_context: {
    schema: Nullable(ShortText('git sources only; trimmed; blank is unset')),
    unset: null,
    shown: 'omitted',
    sources: GIT,
  },
  run_command: {
    schema: Nullable(ShortText('git and docker_image sources')),
    unset: null,
    shown: 'omitted',
    sources: ['github', 'gitlab', 'docker_image'],
  },
  ops_json_path: {
    schema: Nullable(ShortText('git sources only; trimmed')),
    unset: null,
    shown: 'omitted',
    sources: GIT,
  },
  // Its source rule is the spec's rule 5 (a 500), checked apart: see service-rules.ts.
  ops_json: {
    schema: Nullable(LongText('inline ops.json; docker_image source only')),
    unset: null,
    shown: 'omitted',
  },
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
    shown: 'omitted',
    sources: ['docker_image'],
  },
  docker_image: {
    schema: Nullable(ShortText('required for docker_image')),
    unset: null,
    shown: 'omitted',
    sources: ['docker_image'],
  },
  helm_chart_repo: {
    schema: Nullable(ShortText('required for helm_chart')),
    unset: null,
    shown: 'omitted',
    sources: ['helm_chart'],
  },
  helm_chart_name: {
    schema: Nullable(ShortText('required for helm_chart')),
    unset: null,
    shown: 'omitted',
    sources: ['helm_chart'],
  },
  helm_values_yml: {
    schema: Nullable(LongText('contents of values.yaml')),
    unset: null,
    shown: 'omitted',
    sources: ['helm_chart'],
  },
} satisfies Record<string, FieldDeclaration>;

interface FieldDeclaration {
  schema: TSchema;
  unset?: null | false;
  sources?: readonly Source[];
  /** How a read shows the field when unset: absent, null; 'omitted', left out; 'hidden': never shown. */
  shown?: 'omitted' | 'hidden';
  /** The read's schema, where it is not the request's without its input rules (descriptions, bounds). */
  view?: TSchema;
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

type ShownField = { [K in SpecField]: Fields[K] extends { shown: 'hidden' } ? never : K }[SpecField];
type OmittedField = { [K in SpecField]: Fields[K] extends { shown: 'omitted' } ? K : never }[SpecField];

/** The fields a read shows, in declaration order. */
export const SHOWN_FIELDS = SPEC_FIELDS.filter((f) => DECLARATIONS[f].shown !== 'hidden') as ShownField[];

/** What a read says of the spec: each shown field, left out where it is 'omitted' and unset. */
export type SpecView = { [K in Exclude<ShownField, OmittedField>]: ServiceSpec[K] } & {
  [K in OmittedField]?: NonNullable<ServiceSpec[K]>;
};

const OMITTED_WHEN_UNSET: ReadonlySet<SpecField> = new Set(
  SHOWN_FIELDS.filter((f) => DECLARATIONS[f].shown === 'omitted'),
);

// A plain loop: every row of a list goes through here (100 a page), and entries/flatMap cost ~15 us a row.
export function specView(spec: ServiceSpec): SpecView {
  const view: Record<string, unknown> = {};
  for (const f of SHOWN_FIELDS) {
    const value = spec[f];
    if (value !== null || !OMITTED_WHEN_UNSET.has(f)) view[f] = value;
  }
  return view as SpecView;
}

/** Input rules a read does not repeat: what was stored already passed them. */
const INPUT_RULES = ['description', 'minimum', 'maximum', 'exclusiveMinimum', 'exclusiveMaximum'];

function viewSchema(f: SpecField): TSchema {
  const { schema, view, shown } = DECLARATIONS[f];
  const read: Record<string, unknown> = Object.fromEntries(
    Object.entries(view ?? schema).filter(([k]) => view !== undefined || !INPUT_RULES.includes(k)),
  );
  if (shown !== 'omitted') return Type.Unsafe(read);
  // Left out when unset, so never null.
  const { type, enum: values, ...rest } = read;
  const types = Array.isArray(type) ? type.filter((t) => t !== 'null') : [type];
  const nonNull = Array.isArray(values) ? { enum: values.filter((v) => v !== null) } : {};
  return Type.Optional(Type.Unsafe({ ...rest, ...nonNull, type: types.length === 1 ? types[0] : types }));
}

/** The Service response schema's spec fields, derived from the declarations above. */
export const SPEC_VIEW_SCHEMAS = Object.fromEntries(SHOWN_FIELDS.map((f) => [f, viewSchema(f)])) as {
  [K in Exclude<ShownField, OmittedField>]: TUnsafe<ServiceSpec[K]>;
} & { [K in OmittedField]: TOptional<TUnsafe<NonNullable<ServiceSpec[K]>>> };

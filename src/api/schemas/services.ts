import { Type } from 'typebox';
import { SPEC_SCHEMAS, SPEC_VIEW_SCHEMAS } from '../../domain/service-fields.ts';
import { SERVICE_STATES } from '../../domain/service-states.ts';
import { CLOSED, DateTime, Nullable, ReadOnly, StringEnum, Uuid } from './common.ts';
import { CustomDomainSummary } from './custom-domains.ts';
import { Deployment } from './deployments.ts';
import { SecretInput } from './secrets.ts';

/** The fields shared by create and patch, with their shape rules (domain/service-fields.ts); conditional rules are in domain/service-rules.ts. */
const specFields = SPEC_SCHEMAS;

const optionalSpec = Object.fromEntries(
  Object.entries(specFields).map(([k, v]) => [k, Type.Optional(v)]),
) as {
  [K in keyof typeof specFields]: ReturnType<typeof Type.Optional<(typeof specFields)[K]>>;
};

export const CreateServiceBody = Type.Object(
  {
    ...optionalSpec,
    name: specFields.name,
    source: specFields.source,
    deploy_now: Type.Optional(
      Type.Boolean({ description: 'trigger a first deployment right after creation' }),
    ),
    secrets: Type.Optional(Type.Array(SecretInput, { maxItems: 500 })),
    subdomain: Type.Optional(
      Type.Unknown({ readOnly: true, description: 'never accepted: always a field error (the spec)' }),
    ),
  },
  { ...CLOSED, description: 'A field not listed here is a field error.' },
);

export const OpsDependency = Type.Object({
  id: Type.String({ maxLength: 100 }),
  kind: Type.String({ maxLength: 100, description: 'an open set: s3, rds, gcp:cloudsql, ...' }),
  exports: Type.Record(Type.String({ maxLength: 200 }), Type.String({ maxLength: 200 })),
});

const opt = <T extends Parameters<typeof Type.Optional>[0]>(s: T) => Type.Optional(s);

/**
 * A service as reads return it: its spec fields as domain/service-fields.ts declares them (never
 * listed here), then what Berth keeps beside them.
 */
export const Service = Type.Object({
  id: Uuid,
  ...SPEC_VIEW_SCHEMAS,
  state: StringEnum(SERVICE_STATES, { maxLength: 30 }),
  run_status: opt(
    Type.String({ maxLength: 30, description: 'live; on the get-service response and list items' }),
  ),
  ready_count: opt(Type.Integer({ description: 'live; on the get-service response and list items' })),
  gitlab_connection_id: opt(Uuid),
  account_id: Uuid,
  private_instance_id: Uuid,
  subdomain: Type.String({ maxLength: 100 }),
  is_deleted: Type.Boolean(),
  latest_deployment: Nullable(Deployment),
  created_at: DateTime,
  updated_at: DateTime,
  kube_svc_alias: opt(Type.String({ maxLength: 300, description: 'only on the get-service response' })),
  namespace_name: opt(Type.String({ maxLength: 100, description: 'only on get-service, once provisioned' })),
  ip_whitelist: opt(
    Type.Array(Type.String({ maxLength: 50 }), { description: 'only on get-service, when restricted' }),
  ),
  ops_dependencies: opt(Type.Array(OpsDependency, { description: 'only on the get-service response' })),
  kube_secret: Type.String({ maxLength: 200 }),
  kube_dep_secret: Type.String({ maxLength: 200 }),
  kube_preview_dep_secret: Type.String({ maxLength: 200 }),
  custom_domain_id: Uuid,
  custom_domain: Nullable(CustomDomainSummary),
  origin: Type.String({ maxLength: 400 }),
  parent_service_id: Nullable(Uuid),
  is_preview: Type.Boolean(),
  pr_number: Nullable(Type.Integer()),
  pr_comment_id: Nullable(Type.Integer()),
});

/**
 * Any subset of the create fields but deploy_now and secrets. The service's other fields, as a GET
 * returns them, are read-only: accepted and ignored, so that a service read back can be patched.
 */
export const PatchServiceBody = Type.Object(
  {
    ...optionalSpec,
    ...Object.fromEntries(
      Object.keys(Service.properties)
        .filter((field) => !(field in specFields))
        .map((field) => [field, ReadOnly('read-only: ignored')]),
    ),
  },
  {
    ...CLOSED,
    description:
      'Any subset of the create fields except deploy_now and secrets; takes effect on the next deployment. ' +
      "The service's read-only fields are ignored; any other field is a field error.",
  },
);

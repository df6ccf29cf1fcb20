/**
 * What the use cases take, declared once as schemas: the API validates and documents request bodies
 * with them, and each use case's input is the `Static` type of its schema. (The service's own fields
 * are in service-fields.ts.)
 * @module
 */
import { type Static, Type } from 'typebox';
import { CLOUDS } from './environment-states.ts';
import { EVENT_TYPES } from './events.ts';
import { FEATURES, PLANS } from './plans.ts';
import { ROLES } from './roles.ts';
import { CLOSED, Nullable, ReadOnly, StringEnum, Uuid } from './schema-types.ts';
import { MAX_WEBHOOK_URL } from './webhook-rules.ts';

/** A secret's fields, shared by what a caller sends and what a read returns. */
export const SECRET_FIELDS = {
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

export const SecretInput = Type.Object(
  {
    key: SECRET_FIELDS.key,
    value: Type.Optional(SECRET_FIELDS.value),
    description: Type.Optional(SECRET_FIELDS.description),
    use_preview: Type.Optional(SECRET_FIELDS.use_preview),
    is_sensitive: Type.Optional(SECRET_FIELDS.is_sensitive),
    expose_to_chart: Type.Optional(SECRET_FIELDS.expose_to_chart),
    chart_default_val: Type.Optional(SECRET_FIELDS.chart_default_val),
    dep_export: Type.Optional(SECRET_FIELDS.dep_export),
    updated_at: ReadOnly('read-only: ignored, so that entries read back can be sent as they are'),
  },
  CLOSED,
);
/** A secret entry as sent by a caller (shape already checked). */
export type SecretEntry = Static<typeof SecretInput>;

export const SecretsBody = Type.Object({ secrets: Type.Array(SecretInput, { maxItems: 500 }) }, CLOSED);

export const DeployRequestBody = Type.Object(
  {
    commit_id: Type.Optional(
      Type.String({ maxLength: 100, description: 'git sources: the commit to deploy' }),
    ),
    docker_image_tag: Type.Optional(
      Type.String({ maxLength: 128, description: 'docker_image: the tag (default latest)' }),
    ),
    helm_chart_version: Type.Optional(
      Type.String({ maxLength: 100, description: 'helm_chart: the chart version' }),
    ),
    note: Type.Optional(Type.String({ maxLength: 300 })),
    preview: Type.Optional(
      Type.Boolean({ description: 'preview mode: needs commit_id, branch and pr_number' }),
    ),
    branch: Type.Optional(
      Type.String({ maxLength: 100, description: 'preview mode: the pull request branch' }),
    ),
    pr_number: Type.Optional(
      Type.Integer({ minimum: 1, maximum: 2_147_483_647, description: 'preview mode' }),
    ),
  },
  {
    ...CLOSED,
    description:
      'At most one target, fitting the source. `{}` deploys the branch head, the tag latest, or the latest chart.',
  },
);
/** A deploy request; preview mode (`preview: true`) is the same body with its own rules. */
export type DeployBody = Static<typeof DeployRequestBody>;

export const CustomDomainBody = Type.Object(
  { domain: Type.String({ maxLength: 300, description: 'e.g. app.example.com' }) },
  CLOSED,
);
export type CustomDomainInput = Static<typeof CustomDomainBody>;

export const Features = Type.Array(StringEnum(FEATURES), { maxItems: FEATURES.length, uniqueItems: true });

export const NewAccountBody = Type.Object(
  {
    name: Type.String({ minLength: 1, maxLength: 100 }),
    plan: Type.Optional(StringEnum(PLANS, { description: 'default starter' })),
    features: Type.Optional(Features),
  },
  CLOSED,
);
export type NewAccount = Static<typeof NewAccountBody>;

export const AccountChangeBody = Type.Object(
  { plan: Type.Optional(StringEnum(PLANS)), features: Type.Optional(Features) },
  CLOSED,
);
export type AccountChange = Static<typeof AccountChangeBody>;

export const NewEnvironmentBody = Type.Object(
  {
    name: Type.String({ minLength: 1, maxLength: 100 }),
    cloud: Type.Optional(StringEnum(CLOUDS, { description: 'default aws' })),
    region: Type.Optional(
      Type.String({
        maxLength: 50,
        description:
          "one of the cloud's regions (us-east-1, europe-west1, ...); default us-east-1 on aws, us-central1 on gcp",
      }),
    ),
  },
  CLOSED,
);
export type NewEnvironment = Static<typeof NewEnvironmentBody>;

export const GIT_KINDS = ['github', 'gitlab'] as const;

export const GitConnectionBody = Type.Object(
  {
    kind: StringEnum(GIT_KINDS),
    name: Type.String({ minLength: 1, maxLength: 100 }),
    base_url: Type.Optional(
      Type.String({
        maxLength: 300,
        description:
          'where org/repo is cloned from: default https://github.com or https://gitlab.com (GitHub Enterprise, a self-hosted GitLab)',
      }),
    ),
    github_app_id: Type.Optional(
      Type.String({ pattern: '^[0-9]{1,20}$', maxLength: 20, description: 'github: the App id' }),
    ),
    github_installation_id: Type.Optional(
      Type.String({
        pattern: '^[0-9]{1,20}$',
        maxLength: 20,
        description: "github: the App's installation id on the organization or user",
      }),
    ),
    private_key: Type.Optional(
      Type.String({ maxLength: 16_384, description: "github: the App's private key (PEM); write-only" }),
    ),
    token: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 1000,
        description: 'an access token that can read the repositories (instead of an App); write-only',
      }),
    ),
    webhook_secret: Type.String({
      minLength: 16,
      maxLength: 200,
      description: 'the secret the host signs webhooks with (GitHub) or sends (GitLab); write-only',
    }),
  },
  {
    ...CLOSED,
    description:
      'github: an App (github_app_id, github_installation_id, private_key) or a token; gitlab: a token.',
  },
);
export type GitConnectionInput = Static<typeof GitConnectionBody>;

export const GitConnectionChangeBody = Type.Object(
  {
    name: Type.Optional(GitConnectionBody.properties.name),
    private_key: Type.Optional(GitConnectionBody.properties.private_key),
    token: Type.Optional(GitConnectionBody.properties.token),
    webhook_secret: Type.Optional(GitConnectionBody.properties.webhook_secret),
  },
  {
    ...CLOSED,
    description: 'Rotates secrets in place: a token for a token connection, a private key for an App.',
  },
);
export type GitConnectionChange = Static<typeof GitConnectionChangeBody>;

/** POST /v1/webhooks. */
export const WebhookBody = Type.Object(
  {
    url: Type.String({
      minLength: 1,
      maxLength: MAX_WEBHOOK_URL,
      description: 'http:// or https://; a private, loopback or link-local address is refused',
    }),
    event_types: Type.Optional(
      Type.Array(StringEnum(EVENT_TYPES, { maxLength: 40 }), {
        maxItems: EVENT_TYPES.length,
        uniqueItems: true,
        description: 'the event types to deliver (docs/events.md); empty or absent: every type',
      }),
    ),
    description: Type.Optional(Type.String({ maxLength: 300 })),
  },
  CLOSED,
);
export type WebhookInput = Static<typeof WebhookBody>;

export const NewUserBody = Type.Object(
  {
    email: Type.String({ format: 'email', minLength: 3, maxLength: 254 }),
    display_name: Type.String({ minLength: 1, maxLength: 100 }),
  },
  CLOSED,
);
export type NewUser = Static<typeof NewUserBody>;

const EnvironmentIds = Type.Array(Uuid, {
  minItems: 1,
  maxItems: 100,
  uniqueItems: true,
  description: "the account's environments this may reach; absent or null: every one",
});

export const MembershipBody = Type.Object(
  {
    role: StringEnum(ROLES),
    environment_ids: Type.Optional(Nullable(EnvironmentIds)),
  },
  CLOSED,
);
export type MembershipInput = Static<typeof MembershipBody>;

export const NewTokenBody = Type.Object(
  {
    name: Type.String({ minLength: 1, maxLength: 100 }),
    role: StringEnum(ROLES, { description: "at most the maker's own role" }),
    environment_ids: Type.Optional(Nullable(EnvironmentIds)),
    read_only: Type.Optional(Type.Boolean({ description: 'default false: reads only, every write refused' })),
    expires_at: Type.Optional(
      Nullable(Type.String({ format: 'date-time', maxLength: 40, description: 'absent or null: never' })),
    ),
  },
  CLOSED,
);
export type NewToken = Static<typeof NewTokenBody>;

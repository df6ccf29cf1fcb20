/**
 * The tables, as Kysely sees them. Columns carry the API's field names wherever the API has one, so
 * that a projection is a choice of fields, not a translation.
 * @module
 */
import type { ColumnType, Generated, Insertable, Selectable, Updateable } from 'kysely';
import type { AlertRuleName } from '../domain/alert-rules.ts';
import type { CustomDomainState } from '../domain/custom-domain-states.ts';
import type {
  DeploymentState,
  DeploymentType,
  DeployStep,
  OperationState,
  TimelineMark,
} from '../domain/deployment-states.ts';
import type { Cloud, EnvironmentState } from '../domain/environment-states.ts';
import type { EventType } from '../domain/events.ts';
import type { Plan } from '../domain/plans.ts';
import type { Role } from '../domain/roles.ts';
import type { ServiceSpec } from '../domain/service-fields.ts';
import type { ServiceState } from '../domain/service-states.ts';

type Timestamp = ColumnType<Date, Date | string | undefined, Date | string>;
type Json<T> = ColumnType<T, string, string>;

export interface AccountsTable {
  id: string;
  name: string;
  plan: Plan;
  features: Json<string[]>;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export interface ApiTokensTable {
  id: string;
  account_id: string;
  token_hash: string;
  created_at: Timestamp;
  revoked_at: Date | null;
  /** Null for operator-issued tokens. */
  name: string | null;
  role: ColumnType<Role, Role | undefined, Role>;
  /** The user who made it; null for operator-issued tokens. */
  owner_user_id: string | null;
  /** The environments it may reach; null: every one. */
  environment_ids: ColumnType<string[] | null, string | null | undefined, string | null>;
  read_only: Generated<boolean>;
  expires_at: Date | null;
  last_used_at: Date | null;
}

export interface UsersTable {
  id: string;
  email: string;
  display_name: string;
  created_at: Timestamp;
  /** argon2id (PHC string); null: the user has set no password. */
  password_hash: ColumnType<string | null, string | null | undefined, string | null>;
}

export interface SessionsTable {
  id: string;
  /** SHA-256 of the cookie's secret. */
  secret_hash: string;
  user_id: string;
  account_id: string;
  created_at: Timestamp;
  last_seen_at: ColumnType<Date, Date | undefined, Date>;
  expires_at: Date;
  ended_at: ColumnType<Date | null, Date | null | undefined, Date | null>;
  user_agent: string | null;
  client_address: string | null;
}

export interface InvitationsTable {
  id: string;
  secret_hash: string;
  account_id: string;
  email: string;
  role: Role;
  invited_by: string | null;
  created_at: Timestamp;
  expires_at: Date;
  accepted_at: ColumnType<Date | null, Date | null | undefined, Date | null>;
}

/** An account's OpenID Connect provider (migration 0043); the client secret is sealed. */
export interface SsoConfigsTable {
  account_id: string;
  issuer_url: string;
  client_id: string;
  client_secret_sealed: string;
  allowed_domains: ColumnType<string[], string, string>;
  default_role: Role;
  enabled: boolean;
  created_at: Timestamp;
  updated_at: ColumnType<Date, Date | undefined, Date>;
}

/** A single sign-on under way, taken once by its callback (migration 0043). */
export interface SsoFlowsTable {
  state_hash: string;
  account_id: string;
  code_challenge: string;
  nonce: string;
  redirect_uri: string;
  created_at: Timestamp;
  expires_at: Date;
}

/** A `berth login` waiting for, or past, a person's approval (RFC 8628; migration 0046). */
export interface DeviceLoginsTable {
  id: string;
  /** SHA-256 of the code the CLI polls with. */
  device_code_hash: string;
  /** SHA-256 of the short code the person types or follows (normalized: upper case, no dash). */
  user_code_hash: string;
  client_id: string;
  /** The machine's name, as the CLI told it (shown to the approver, named in the token). */
  device_name: string | null;
  client_address: string | null;
  user_agent: string | null;
  created_at: Timestamp;
  expires_at: Date;
  /** Seconds the CLI waits between polls; each poll too soon adds 5 (RFC 8628's slow_down). */
  interval_s: number;
  last_polled_at: ColumnType<Date | null, Date | null | undefined, Date | null>;
  state: ColumnType<DeviceLoginState, DeviceLoginState | undefined, DeviceLoginState>;
  account_id: ColumnType<string | null, string | null | undefined, string | null>;
  user_id: ColumnType<string | null, string | null | undefined, string | null>;
  decided_at: ColumnType<Date | null, Date | null | undefined, Date | null>;
  token_id: ColumnType<string | null, string | null | undefined, string | null>;
}

export type DeviceLoginState = 'pending' | 'approved' | 'denied' | 'collected';

export interface SignInLinksTable {
  id: string;
  secret_hash: string;
  user_id: string;
  account_id: string;
  created_at: Timestamp;
  expires_at: Date;
  used_at: ColumnType<Date | null, Date | null | undefined, Date | null>;
}

/** A user's passkey (WebAuthn credential): its id and public key as base64url, never a secret. */
export interface PasskeysTable {
  id: string;
  user_id: string;
  credential_id: string;
  public_key: string;
  /** The authenticator's signature counter (bigint: read as a string). */
  counter: ColumnType<string, number, number>;
  /** How the browser may reach the authenticator (`internal`, `usb`, `hybrid`...). */
  transports: ColumnType<string[], string, string>;
  name: string;
  created_at: Timestamp;
  last_used_at: ColumnType<Date | null, Date | null | undefined, Date | null>;
}

/** A WebAuthn ceremony under way: its challenge, used once before it expires. */
export interface WebauthnChallengesTable {
  challenge: string;
  purpose: 'registration' | 'authentication';
  /** Whose passkey a registration adds; null for a sign-in (the passkey names its user). */
  user_id: string | null;
  expires_at: Date;
}

export interface MembershipsTable {
  user_id: string;
  account_id: string;
  role: Role;
  /** The environments the member may reach; null: every one. */
  environment_ids: ColumnType<string[] | null, string | null | undefined, string | null>;
  created_at: Timestamp;
}

export interface EnvironmentsTable {
  id: string;
  account_id: string;
  name: string;
  cloud: Cloud;
  region: string;
  state: EnvironmentState;
  created_at: Timestamp;
  updated_at: Timestamp;
}

/** The configurable fields (domain/service-fields.ts, one declaration) and what Berth keeps beside them. */
export interface ServicesTable extends ServiceSpec {
  id: string;
  account_id: string;
  environment_id: string;
  state: ServiceState;
  is_deleted: boolean;
  gitlab_connection_id: string | null;
  subdomain: string;
  kube_secret: string;
  kube_dep_secret: string;
  kube_preview_dep_secret: string;
  namespace_name: string | null;
  kube_svc_alias: string | null;
  custom_domain_id: string | null;
  parent_service_id: string | null;
  is_preview: boolean;
  pr_number: number | null;
  pr_comment_id: number | null;
  latest_deployment_id: string | null;
  /** A git service's ops config (OpsConfig JSON) as its newest started deployment read it. */
  repo_ops: ColumnType<string | null, string | null | undefined, string | null>;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export interface AuditLogsTable {
  id: string;
  account_id: string;
  actor: string;
  token_id: string | null;
  action: string;
  resource_type: string;
  resource_id: string | null;
  environment_id: string | null;
  request_id: string;
  client_address: string | null;
  user_id: string | null;
  user_email: string | null;
  token_name: string | null;
  user_agent: string | null;
  created_at: Timestamp;
}

export interface DeploymentsTable {
  id: string;
  account_id: string;
  environment_id: string;
  service_id: string;
  type: DeploymentType;
  state: DeploymentState;
  prev_deployment_id: string | null;
  prov_deployment_id: ColumnType<string, string | undefined, string>;
  git_commit_ref: ColumnType<string, string | undefined, string>;
  git_commit_author: ColumnType<string, string | undefined, string>;
  git_commit_message: ColumnType<string, string | undefined, string>;
  docker_image_tag: ColumnType<string, string | undefined, string>;
  helm_chart_version: ColumnType<string, string | undefined, string>;
  helm_values_yml: ColumnType<string, string | undefined, string>;
  docker_image_digest: ColumnType<string, string | undefined, string>;
  note: ColumnType<string, string | undefined, string>;
  failure_reason: ColumnType<string, string | undefined, string>;
  ops_snapshot: ColumnType<string | null, string | null | undefined, string | null>;
  variables_sealed: ColumnType<string | null, string | null | undefined, string | null>;
  restored_from: ColumnType<string | null, string | null | undefined, string | null>;
  cancel_requested: ColumnType<boolean, boolean | undefined, boolean>;
  /** Fencing token of the provider changes this deployment makes (bigint: read as a string). */
  generation: Generated<string>;
  created_at: Generated<Date>;
  updated_at: Generated<Date>;
}

export interface ServiceObservationsTable {
  service_id: string;
  run_status: string;
  ready_count: number;
  observed_at: Generated<Date>;
}

/** Bigint columns are written as numbers and read back as strings (the service metrics API casts them). */
type BigintColumn = ColumnType<string | null, number | null, number | null>;

export interface ServiceMetricsTable {
  service_id: string;
  /** 60: one minute's sample; 3600: an hour folded from its minutes. */
  resolution_s: number;
  at: Date;
  samples: number;
  cpu_cores: number | null;
  memory_bytes: BigintColumn;
  memory_limit_bytes: BigintColumn;
  restarts: number | null;
  network_rx_bytes: BigintColumn;
  network_tx_bytes: BigintColumn;
  requests: number;
  status_2xx: number;
  status_3xx: number;
  status_4xx: number;
  status_5xx: number;
  latency_p50_ms: number | null;
  latency_p95_ms: number | null;
  latency_p99_ms: number | null;
}

export interface SecretsTable {
  scope: 'service' | 'environment';
  scope_id: string;
  key: string;
  value_sealed: string;
  description: string;
  use_preview: boolean;
  is_sensitive: boolean;
  expose_to_chart: boolean | null;
  chart_default_val: string | null;
  dep_export: boolean | null;
  updated_at: Timestamp;
}

export interface JobsTable {
  seq: Generated<string>;
  kind: string;
  subject_id: string;
  queue_key: string | null;
  /** The account the job works for: the workers budget their slots per account (null: no account). */
  account_id: string | null;
  run_after: Timestamp;
  attempts: Generated<number>;
  max_attempts: number;
  locked_by: string | null;
  locked_until: Date | null;
  last_error: string | null;
  created_at: Timestamp;
}

export interface CustomDomainsTable {
  id: string;
  account_id: string;
  environment_id: string;
  service_id: string;
  domain: string;
  state: CustomDomainState;
  prov_custom_domain_id: ColumnType<string, string | undefined, string>;
  verify_token: string;
  validation_token: string;
  failure_reason: ColumnType<string, string | undefined, string>;
  created_at: Generated<Date>;
  updated_at: Generated<Date>;
}

export type CertificateStatus = 'pending' | 'issued' | 'failed' | 'renewing';

export interface CertificatesTable {
  custom_domain_id: string;
  service_id: string;
  name: string;
  status: CertificateStatus;
  issuer: string | null;
  not_before: Date | null;
  not_after: Date | null;
  renew_after: Date | null;
  last_error: string | null;
  failures: Generated<number>;
  next_attempt_at: Date | null;
  /** Sealed (SecretBox): the certificate and its chain, PEM. */
  cert_pem: string | null;
  /** Sealed: the certificate's private key, PEM. */
  private_key: string | null;
  order_url: string | null;
  /** Sealed: the key of the order in flight. */
  order_key: string | null;
  created_at: Generated<Date>;
  updated_at: Generated<Date>;
}

/** The API's own certificate (BERTH_TLS_ACME_NAME): a certificate's columns, keyed by its name. */
export type ApiCertificatesTable = Omit<CertificatesTable, 'custom_domain_id' | 'service_id'>;

export interface AcmeAccountsTable {
  directory_url: string;
  /** Sealed: the account's private key, PEM. */
  account_key: string;
  created_at: Generated<Date>;
}

export interface AcmeChallengesTable {
  token: string;
  key_authorization: string;
  name: string;
  type: Generated<'http-01' | 'tls-alpn-01'>;
  /** TLS-ALPN-01: the challenge certificate (PEM) and its key (sealed). */
  alpn_certificate: string | null;
  alpn_key: string | null;
  created_at: Generated<Date>;
}

/** A wildcard certificate of the ingress domain, by DNS-01 (migration 0044). */
export interface IngressCertificatesTable
  extends Omit<CertificatesTable, 'custom_domain_id' | 'service_id' | 'created_at' | 'updated_at'> {
  id: Generated<string>;
  created_at: Generated<Date>;
  updated_at: Generated<Date>;
}
export type IngressCertificateRow = Selectable<IngressCertificatesTable>;

export interface SettingsTable {
  key: string;
  value: string;
}

export interface RateLimitWindowsTable {
  key: string;
  window_start: Date;
  hits: number;
}

export interface IdempotencyKeysTable {
  scope: string;
  key: string;
  fingerprint: string;
  status: number | null;
  /** The answer's body, sealed (SecretBox): it may carry a one-time secret. */
  body_sealed: string | null;
  /** The answer's own headers (REPLAYED_HEADERS) as a JSON object; null when it had none. */
  answer_headers: string | null;
  claim: string | null;
  done: Generated<boolean>;
  created_at: Generated<Date>;
}

/** A dependency of ops.json: what Berth asked the provider to make for a service, and what it got. */
export interface ServiceResourcesTable {
  service_id: string;
  kind: string;
  type: string;
  resource_id: string;
  prefix: string;
  /** The declared resource it was made from (jsonb; pg parses it): a change updates it. */
  spec: ColumnType<unknown, string, string>;
  state: ResourceState;
  attributes: ColumnType<Record<string, string>, string | undefined, string>;
  /** A generated password, sealed like a secret. */
  password: string | null;
  /** Why it could not be made (while retried, or for good when failed). */
  error: Generated<string>;
  provisioned_at: Date | null;
  updated_at: Generated<Date>;
}

export type ResourceState = 'provisioning' | 'available' | 'failed' | 'deleting';
export interface DeploymentLogsTable {
  /** bigint: read as a string. */
  seq: Generated<string>;
  deployment_id: string;
  step: DeployStep;
  line: string;
  dropped: number | null;
  at: Generated<Date>;
}

export interface DeploymentOperationsTable {
  deployment_id: string;
  step: DeployStep;
  state: OperationState;
  detail: ColumnType<string, string | undefined, string>;
  started_at: Date;
  finished_at: Date | null;
}

/** One moment of a deployment's timeline, the first time it happened. */
export interface DeploymentTimelineTable {
  deployment_id: string;
  mark: TimelineMark;
  at: Date;
}

/** One state change of an account (store/events.ts writes them). */
export interface EventsTable {
  /** bigint: read as a string. */
  seq: Generated<string>;
  account_id: string;
  /** `<kind>.<created|updated|deleted>`. */
  type: string;
  /** The resource's new state: the columns its EVENT_SOURCES entry keeps (pg parses jsonb). */
  data: ColumnType<Record<string, unknown>, string, string>;
  at: Generated<Date>;
}

/** A webhook subscription (migration 0019). */
export interface WebhooksTable {
  id: string;
  account_id: string;
  url: string;
  /** Empty: every type. */
  event_types: ColumnType<EventType[], EventType[], EventType[]>;
  description: ColumnType<string, string | undefined, string>;
  /** The signing secret (`whsec_...`), sealed (secret-box.ts). */
  secret_sealed: string;
  created_at: Generated<Date>;
}

export type WebhookDeliveryState = 'pending' | 'succeeded' | 'failed';

export interface WebhookDeliveriesTable {
  id: Generated<string>;
  webhook_id: string;
  /** bigint: read as a string. */
  event_seq: string;
  event_type: EventType;
  state: ColumnType<WebhookDeliveryState, WebhookDeliveryState | undefined, WebhookDeliveryState>;
  attempts: ColumnType<number, number | undefined, number>;
  response_code: number | null;
  last_error: ColumnType<string, string | undefined, string>;
  created_at: Generated<Date>;
  updated_at: Generated<Date>;
}

export type GitKind = 'github' | 'gitlab';
export type GitCredentialKind = 'github_app' | 'token';

/** An account's credential for a git host. The secret and the webhook secret are sealed (secret-box.ts). */
export interface GitConnectionsTable {
  id: string;
  account_id: string;
  kind: GitKind;
  name: string;
  /** Where repositories are cloned from: `{base_url}/{org}/{repo}`. */
  base_url: string;
  credential: GitCredentialKind;
  github_app_id: string | null;
  github_installation_id: string | null;
  /** The GitHub App's private key (PEM), or the token. */
  secret_sealed: string;
  webhook_secret_sealed: string;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export interface GitDeliveriesTable {
  connection_id: string;
  delivery_id: string;
  event: string;
  received_at: Generated<Date>;
}

/** The branch head the git poller last saw for a service. */
export interface GitPollHeadsTable {
  service_id: string;
  head: string;
  seen_at: Generated<Date>;
  /** The commit time of the newest push deployed on the service: an older push is not deployed. */
  pushed_at: Date | null;
}

export type BackupState = 'pending' | 'running' | 'completed' | 'failed';

/** A logical backup of an ops.json dependency, and its latest restore (migration 0034). */
export interface DependencyBackupsTable {
  id: string;
  service_id: string;
  kind: string;
  type: string;
  resource_id: string;
  trigger: 'manual' | 'scheduled';
  state: BackupState;
  /** The driver's name for the file it wrote; empty until it completed. */
  location: Generated<string>;
  /** bigint: read as a string. */
  size_bytes: ColumnType<string | null, number | null | undefined, number | null>;
  error: Generated<string>;
  created_at: Generated<Date>;
  completed_at: Date | null;
  restore_state: BackupState | null;
  /** The services stopped for the restore's duration (jsonb array of ids). */
  restore_stopped_services: ColumnType<string[], string | undefined, string>;
  restore_error: Generated<string>;
  /** Where the latest restore went: the dependency itself, or a copy made for inspection. */
  restore_into: 'same' | 'new' | null;
  /** The copy's attributes (never a password) for a restore into a new one. */
  restore_attributes: ColumnType<Record<string, string>, string | undefined, string>;
  restore_requested_at: Date | null;
  restore_completed_at: Date | null;
  updated_at: Generated<Date>;
}

/** A service's own alert rule settings, as PUT (migration 0040); absent: the defaults. */
export interface AlertRulesTable {
  service_id: string;
  rules: ColumnType<Record<string, unknown>, string, string>;
  updated_at: Generated<Date>;
}

/** One alert's life: opened when its rule tripped, resolved when it stopped holding (migration 0040). */
export interface AlertsTable {
  id: string;
  service_id: string;
  rule: AlertRuleName;
  state: 'open' | 'resolved';
  opened_at: Date;
  resolved_at: Date | null;
  value: number | null;
  message: string;
}

export interface Database {
  accounts: AccountsTable;
  api_tokens: ApiTokensTable;
  users: UsersTable;
  memberships: MembershipsTable;
  sessions: SessionsTable;
  sign_in_links: SignInLinksTable;
  device_logins: DeviceLoginsTable;
  invitations: InvitationsTable;
  passkeys: PasskeysTable;
  webauthn_challenges: WebauthnChallengesTable;
  sso_configs: SsoConfigsTable;
  sso_flows: SsoFlowsTable;
  environments: EnvironmentsTable;
  services: ServicesTable;
  audit_logs: AuditLogsTable;
  deployments: DeploymentsTable;
  service_observations: ServiceObservationsTable;
  service_metrics: ServiceMetricsTable;
  secrets: SecretsTable;
  jobs: JobsTable;
  custom_domains: CustomDomainsTable;
  certificates: CertificatesTable;
  api_certificates: ApiCertificatesTable;
  acme_accounts: AcmeAccountsTable;
  acme_challenges: AcmeChallengesTable;
  ingress_certificates: IngressCertificatesTable;
  settings: SettingsTable;
  rate_limit_windows: RateLimitWindowsTable;
  idempotency_keys: IdempotencyKeysTable;
  service_resources: ServiceResourcesTable;
  deployment_logs: DeploymentLogsTable;
  deployment_operations: DeploymentOperationsTable;
  deployment_timeline: DeploymentTimelineTable;
  events: EventsTable;
  webhooks: WebhooksTable;
  webhook_deliveries: WebhookDeliveriesTable;
  git_connections: GitConnectionsTable;
  git_deliveries: GitDeliveriesTable;
  git_poll_heads: GitPollHeadsTable;
  dependency_backups: DependencyBackupsTable;
  alert_rules: AlertRulesTable;
  alerts: AlertsTable;
}

export type AccountRow = Selectable<AccountsTable>;
export type ApiTokenRow = Selectable<ApiTokensTable>;
export type UserRow = Selectable<UsersTable>;
export type MembershipRow = Selectable<MembershipsTable>;
export type EnvironmentRow = Selectable<EnvironmentsTable>;
export type ServiceRow = Selectable<ServicesTable>;
export type NewService = Insertable<ServicesTable>;
export type ServiceUpdate = Updateable<ServicesTable>;
export type AuditLogRow = Selectable<AuditLogsTable>;
export type NewAuditLog = Insertable<AuditLogsTable>;
export type DeploymentRow = Selectable<DeploymentsTable>;
export type SecretRow = Selectable<SecretsTable>;
export type JobRow = Selectable<JobsTable>;
export type CustomDomainRow = Selectable<CustomDomainsTable>;
export type CertificateRow = Selectable<CertificatesTable>;
export type ApiCertificateRow = Selectable<ApiCertificatesTable>;
export type ServiceResourceRow = Selectable<ServiceResourcesTable>;
export type DependencyBackupRow = Selectable<DependencyBackupsTable>;
export type DeploymentLogRow = Selectable<DeploymentLogsTable>;
export type DeploymentOperationRow = Selectable<DeploymentOperationsTable>;
export type DeploymentTimelineRow = Selectable<DeploymentTimelineTable>;
export type EventRow = Selectable<EventsTable>;
export type GitConnectionRow = Selectable<GitConnectionsTable>;
export type WebhookRow = Selectable<WebhooksTable>;
export type WebhookDeliveryRow = Selectable<WebhookDeliveriesTable>;

import { type TSchema, Type } from 'typebox';
import { CUSTOM_DOMAIN_STATES } from '../../domain/custom-domain-states.ts';
import {
  ALERT_EVENT_TYPES,
  CERTIFICATE_EVENT_TYPES,
  EVENT_ACTIONS,
  type EventKind,
} from '../../domain/events.ts';
import { SERVICE_STATES } from '../../domain/service-states.ts';
import { Alert, BackupAlert } from './alerts.ts';
import { DateTime, Nullable, Seq, StringEnum, Uuid } from './common.ts';
import { Certificate } from './custom-domains.ts';
import { Deployment } from './deployments.ts';

const BACKUP_STATES = ['pending', 'running', 'completed', 'failed'] as const;

/** A service's state in an event: what changes when it moves, not its whole configuration. */
const ServiceState = Type.Object({
  id: Uuid,
  account_id: Uuid,
  private_instance_id: Uuid,
  name: Type.String({ maxLength: 200 }),
  state: StringEnum(SERVICE_STATES, { maxLength: 30 }),
  is_deleted: Type.Boolean(),
  subdomain: Type.String({ maxLength: 100 }),
  latest_deployment_id: Nullable(Uuid),
  created_at: DateTime,
  updated_at: DateTime,
});

const CustomDomainState = Type.Object({
  id: Uuid,
  account_id: Uuid,
  private_instance_id: Uuid,
  service_id: Uuid,
  domain: Type.String({ maxLength: 253 }),
  state: StringEnum(CUSTOM_DOMAIN_STATES, { maxLength: 30 }),
  failure_reason: Type.String({ maxLength: 2000 }),
  created_at: DateTime,
  updated_at: DateTime,
});

/** An ops.json dependency of a service; its attributes (which may carry credentials) never appear. */
const DependencyState = Type.Object({
  service_id: Uuid,
  kind: Type.String({ maxLength: 40 }),
  type: Type.String({ maxLength: 40 }),
  resource_id: Type.String({ maxLength: 200 }),
  state: StringEnum(['provisioning', 'available', 'failed', 'deleting'] as const, { maxLength: 20 }),
  error: Type.String({ maxLength: 2000 }),
  provisioned_at: Nullable(DateTime),
  updated_at: DateTime,
});

/** A dependency backup and its latest restore (a failed one carries its reason: the alert). */
const DependencyBackupState = Type.Object({
  id: Uuid,
  service_id: Uuid,
  kind: Type.String({ maxLength: 40 }),
  type: Type.String({ maxLength: 40 }),
  resource_id: Type.String({ maxLength: 200 }),
  trigger: StringEnum(['manual', 'scheduled'] as const, { maxLength: 20 }),
  state: StringEnum(BACKUP_STATES, { maxLength: 20 }),
  size_bytes: Nullable(Type.Integer({ minimum: 0 })),
  error: Type.String({ maxLength: 2000 }),
  created_at: DateTime,
  completed_at: Nullable(DateTime),
  restore_state: Nullable(StringEnum(BACKUP_STATES, { maxLength: 20 })),
  restore_into: Type.Optional(Nullable(StringEnum(['same', 'new'] as const, { maxLength: 10 }))),
  restore_stopped_services: Type.Array(Uuid),
  restore_error: Type.String({ maxLength: 2000 }),
  restore_requested_at: Nullable(DateTime),
  restore_completed_at: Nullable(DateTime),
  updated_at: DateTime,
});

/** A secret write: which key of which scope; never its value. */
const SecretState = Type.Object({
  scope: StringEnum(['service', 'environment'] as const, { maxLength: 20 }),
  scope_id: Uuid,
  key: Type.String({ maxLength: 200 }),
  is_sensitive: Type.Boolean(),
  description: Type.String({ maxLength: 2000 }),
  updated_at: DateTime,
});

/** A custom domain's certificate after it was issued, renewed or failed: the domain's read's `certificate`, and whose it is. */
const CertificateState = Type.Object({
  custom_domain_id: Uuid,
  service_id: Uuid,
  domain: Type.String({ maxLength: 253 }),
  ...Certificate.properties,
});

const STATE_OF: Record<EventKind, TSchema> = {
  deployment: Deployment,
  service: ServiceState,
  custom_domain: CustomDomainState,
  dependency: DependencyState,
  dependency_backup: DependencyBackupState,
  secret: SecretState,
};

/**
 * One event, as GET /v1/events streams it (`data:` of an SSE frame whose `id:` is `id` and whose
 * `event:` is `type`) and as a webhook delivers it (the Standard Webhooks payload: type, timestamp, data). `data` is the resource's state after the change
 * (before it, for `deleted`).
 */
const eventOf = (types: readonly string[], state: TSchema) =>
  Type.Object({
    id: Type.String({
      maxLength: 19,
      description: 'ordered within the account; pass back as Last-Event-ID',
    }),
    type: StringEnum(types, { maxLength: 40 }),
    account_id: Uuid,
    timestamp: { ...DateTime, description: 'when the change committed' },
    data: state,
  });

export const Event = Type.Union([
  ...Object.entries(STATE_OF).map(([kind, state]) =>
    eventOf(
      EVENT_ACTIONS.map((action) => `${kind}.${action}`),
      state,
    ),
  ),
  // An alert opening or resolving: the alert after it (docs/metrics.md, "Alert rules").
  eventOf(ALERT_EVENT_TYPES, Alert),
  // Berth's scheduled backup of its own state failing, and the next good one (docs/operations.md).
  eventOf(ALERT_EVENT_TYPES, BackupAlert),
  // A certificate issued, renewed, or an order that failed (docs/https.md).
  eventOf(CERTIFICATE_EVENT_TYPES, CertificateState),
]);

/** Sent first when Last-Event-ID is older than retention: events after it may be gone. */
export const EventsExpired = Type.Object({
  last_event_id: Type.String({ maxLength: 19 }),
  oldest_event_id: Type.String({ maxLength: 19, description: 'the stream goes on after this id' }),
  message: Type.String({ maxLength: 300 }),
});

export const EventsQuery = Type.Object(
  {
    last_event_id: Type.Optional(
      Seq('resume after this event (what the Last-Event-ID header says, for clients that cannot set it)'),
    ),
  },
  { additionalProperties: false },
);

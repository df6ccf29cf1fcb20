/**
 * What GET /v1/events and webhooks report: every state change of an account's deployments, services,
 * custom domains, dependencies and their backups, and every secret write (store/events.ts records them,
 * from the code that makes each change).
 * A type is `<kind>.<created|updated|deleted>`, `alert.opened` / `alert.resolved`, or `certificate.<issued|renewed|failed>`.
 */
export const EVENT_KINDS = [
  'deployment',
  'service',
  'custom_domain',
  'dependency',
  'dependency_backup',
  'secret',
] as const;
export type EventKind = (typeof EVENT_KINDS)[number];
export const EVENT_ACTIONS = ['created', 'updated', 'deleted'] as const;

/** A service's alert opening and resolving (jobs/alerts.ts records them, not a trigger). */
export const ALERT_EVENT_TYPES = ['alert.opened', 'alert.resolved'] as const;

/**
 * A custom domain's certificate issued (its first), renewed, or an order that failed (a renewal's too:
 * the certificate then still serves). jobs/certificates.ts records them; its row writes are no events.
 */
export const CERTIFICATE_EVENT_TYPES = [
  'certificate.issued',
  'certificate.renewed',
  'certificate.failed',
] as const;
export type CertificateEventType = (typeof CERTIFICATE_EVENT_TYPES)[number];

export const EVENT_TYPES = [
  ...EVENT_KINDS.flatMap((kind) => EVENT_ACTIONS.map((action) => `${kind}.${action}` as const)),
  ...ALERT_EVENT_TYPES,
  ...CERTIFICATE_EVENT_TYPES,
];
export type EventType = (typeof EVENT_TYPES)[number];

/** Events older than this many hours are dropped (BERTH_EVENT_RETENTION_HOURS): three days by default. */
export const DEFAULT_EVENT_RETENTION_HOURS = 72;

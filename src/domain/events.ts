/**
 * What GET /v1/events and webhooks report: every state change of an account's deployments, services,
 * custom domains, dependencies and their backups, and every secret write (migration 0018's triggers record them).
 * A type is `<kind>.<created|updated|deleted>`, or `alert.opened` / `alert.resolved`.
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

export const EVENT_TYPES = [
  ...EVENT_KINDS.flatMap((kind) => EVENT_ACTIONS.map((action) => `${kind}.${action}` as const)),
  ...ALERT_EVENT_TYPES,
];
export type EventType = (typeof EVENT_TYPES)[number];

/** Events older than this many hours are dropped (BERTH_EVENT_RETENTION_HOURS): three days by default. */
export const DEFAULT_EVENT_RETENTION_HOURS = 72;

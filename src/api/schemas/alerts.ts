import { type TOptional, type TSchema, Type } from 'typebox';
import { ALERT_RULES, MAX_ALERT_WINDOW_MINUTES } from '../../domain/alert-rules.ts';
import { CLOSED, DateTime, Nullable, StringEnum, Uuid } from './common.ts';

const Enabled = Type.Boolean({
  description: 'whether the rule opens alerts (turned off, its open alert resolves)',
});
const Minutes = Type.Integer({
  minimum: 1,
  maximum: MAX_ALERT_WINDOW_MINUTES,
  description: 'the window, in minutes (minute samples are kept a day)',
});
const Percent = (description: string) => Type.Number({ minimum: 1, maximum: 100, description });

/** Each rule's settings; in a PUT every field is optional (left out: the default). */
const RULE_FIELDS = {
  crash_loop: {
    enabled: Enabled,
    restarts: Type.Integer({
      minimum: 1,
      maximum: 10_000,
      description: 'restarts in the window that open it',
    }),
    minutes: Minutes,
  },
  deploy_failed: { enabled: Enabled },
  memory_high: {
    enabled: Enabled,
    percent: Percent('memory above this percent of the limit, every minute of the window, opens it'),
    minutes: Minutes,
  },
  error_rate_high: {
    enabled: Enabled,
    percent: Percent("the 5xx share of the window's requests, in percent, that opens it"),
    min_requests: Type.Integer({
      minimum: 1,
      maximum: 10_000_000,
      description: 'fewer requests in the window never open it',
    }),
    minutes: Minutes,
  },
  no_ready_replica: { enabled: Enabled },
};

const partial = <T extends Record<string, TSchema>>(fields: T) =>
  Type.Optional(
    Type.Object(
      Object.fromEntries(Object.entries(fields).map(([k, v]) => [k, Type.Optional(v)])) as {
        [K in keyof T]: TOptional<T[K]>;
      },
      CLOSED,
    ),
  );

export const AlertRulesBody = Type.Object(
  {
    crash_loop: partial(RULE_FIELDS.crash_loop),
    deploy_failed: partial(RULE_FIELDS.deploy_failed),
    memory_high: partial(RULE_FIELDS.memory_high),
    error_rate_high: partial(RULE_FIELDS.error_rate_high),
    no_ready_replica: partial(RULE_FIELDS.no_ready_replica),
  },
  CLOSED,
);

export const AlertRules = Type.Object({
  crash_loop: Type.Object(RULE_FIELDS.crash_loop),
  deploy_failed: Type.Object(RULE_FIELDS.deploy_failed),
  memory_high: Type.Object(RULE_FIELDS.memory_high),
  error_rate_high: Type.Object(RULE_FIELDS.error_rate_high),
  no_ready_replica: Type.Object(RULE_FIELDS.no_ready_replica),
});

export const AlertRulesAnswer = Type.Object({
  rules: { ...AlertRules, description: "the service's rules: its own settings over the defaults" },
  defaults: AlertRules,
});

export const Alert = Type.Object({
  id: Uuid,
  service_id: Uuid,
  rule: StringEnum(ALERT_RULES, { maxLength: 40 }),
  state: StringEnum(['open', 'resolved'] as const, { maxLength: 20 }),
  opened_at: DateTime,
  resolved_at: Nullable(DateTime),
  value: Nullable(
    Type.Number({
      description: "the value that tripped it, in the rule's unit (percent, restarts, ready replicas)",
    }),
  ),
  message: Type.String({ maxLength: 2000 }),
});

/** Berth's own scheduled backup failing: no service's alert, an event of every account (docs/operations.md). */
export const BackupAlert = Type.Object({
  id: Uuid,
  service_id: Type.Null(),
  rule: Type.Literal('backup_failed'),
  state: StringEnum(['open', 'resolved'] as const, { maxLength: 20 }),
  opened_at: DateTime,
  resolved_at: Nullable(DateTime),
  value: Type.Null(),
  message: Type.String({ maxLength: 2000, description: "the failed backup's reason" }),
});

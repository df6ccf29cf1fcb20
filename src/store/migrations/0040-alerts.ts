import type { Kysely } from 'kysely';
import { runStatements } from './run-statements.ts';

/**
 * Alerts on services (docs/metrics.md, "Alert rules"). `alert_rules` holds a service's own settings as
 * it PUT them (absent: the defaults, domain/alert-rules.ts). `alerts` is each alert's life: opened
 * when its rule trips, resolved when it no longer holds; at most one open per service and rule (the
 * partial unique index), so two evaluators can never open the same alert twice. The value that tripped
 * it is kept as a number in the rule's unit (percent, restarts, replicas).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await runStatements(db, [
    `CREATE TABLE alert_rules (
      service_id uuid PRIMARY KEY REFERENCES services (id) ON DELETE CASCADE,
      rules jsonb NOT NULL,
      updated_at timestamptz NOT NULL DEFAULT clock_timestamp()
    )`,
    `CREATE TABLE alerts (
      id uuid PRIMARY KEY,
      service_id uuid NOT NULL REFERENCES services (id) ON DELETE CASCADE,
      rule text NOT NULL,
      state text NOT NULL CHECK (state IN ('open', 'resolved')),
      opened_at timestamptz NOT NULL,
      resolved_at timestamptz,
      value double precision,
      message text NOT NULL
    )`,
    `CREATE UNIQUE INDEX alerts_one_open ON alerts (service_id, rule) WHERE state = 'open'`,
    'CREATE INDEX alerts_by_service ON alerts (service_id, opened_at DESC, id DESC)',
  ]);
}

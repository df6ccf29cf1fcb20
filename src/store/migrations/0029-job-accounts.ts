import type { Kysely } from 'kysely';
import { runStatements } from './run-statements.ts';

/**
 * The account a job works for, so the workers can give each account a budget of their slots (one
 * account's slow webhook receiver or long deployments never take every slot). Jobs already queued are
 * filled in from their subjects; the fan-out trigger, while it exists, records the event's account.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await runStatements(db, [
    'ALTER TABLE jobs ADD COLUMN account_id uuid',
    `UPDATE jobs j SET account_id = CASE
      WHEN j.kind = 'provision_environment' OR j.kind = 'write_environment_secrets'
        THEN (SELECT account_id FROM environments WHERE id = j.subject_id)
      WHEN j.kind = 'deploy' THEN (SELECT account_id FROM deployments WHERE id = j.subject_id)
      WHEN j.kind = 'delete_service' OR j.kind = 'write_service_secrets'
        THEN (SELECT account_id FROM services WHERE id = j.subject_id)
      WHEN j.kind = 'deploy_custom_domain' OR j.kind = 'retire_custom_domain'
        THEN (SELECT account_id FROM custom_domains WHERE id = j.subject_id)
      WHEN j.kind = 'deliver_webhook' THEN (SELECT w.account_id FROM webhook_deliveries d
        JOIN webhooks w ON w.id = d.webhook_id WHERE d.id = j.subject_id)
    END`,
    // Only while the trigger exists: event fan-out may have moved out of the database by now.
    `DO $$ BEGIN
      IF EXISTS (SELECT 1 FROM pg_proc WHERE proname = 'berth_fan_out_event') THEN
        CREATE OR REPLACE FUNCTION berth_fan_out_event() RETURNS trigger LANGUAGE plpgsql AS $f$
        BEGIN
          WITH delivery AS (
            INSERT INTO webhook_deliveries (webhook_id, event_seq, event_type)
            SELECT w.id, NEW.seq, NEW.type FROM webhooks w
            WHERE w.account_id = NEW.account_id
              AND (cardinality(w.event_types) = 0 OR NEW.type = ANY (w.event_types))
            RETURNING id
          )
          INSERT INTO jobs (kind, subject_id, max_attempts, account_id)
          SELECT 'deliver_webhook', id, 8, NEW.account_id FROM delivery;
          IF FOUND THEN
            PERFORM pg_notify('berth_jobs', '');
          END IF;
          RETURN NULL;
        END $f$;
      END IF;
    END $$`,
  ]);
}

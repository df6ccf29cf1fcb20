import type { Kysely } from 'kysely';
import { runStatements } from './run-statements.ts';

/**
 * Webhooks out. A subscription names a URL and the event types it wants (none: all). Each event
 * (migration 0018) that a subscription wants becomes a delivery and a `deliver_webhook` job in the
 * event's own transaction, by a trigger on `events`: a change, its event and its deliveries commit
 * together. Jobs get 8 attempts (the handler's backoff spaces them out).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await runStatements(db, [
    `CREATE TABLE webhooks (
      id uuid PRIMARY KEY,
      account_id uuid NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
      url text NOT NULL,
      event_types text[] NOT NULL,
      description text NOT NULL DEFAULT '',
      secret_sealed text NOT NULL,
      created_at timestamptz(3) NOT NULL DEFAULT clock_timestamp()
    )`,
    'CREATE INDEX webhooks_by_account ON webhooks (account_id, created_at)',
    `CREATE TABLE webhook_deliveries (
      id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
      webhook_id uuid NOT NULL REFERENCES webhooks(id) ON DELETE CASCADE,
      event_seq bigint NOT NULL,
      event_type text NOT NULL,
      state text NOT NULL DEFAULT 'pending',
      attempts integer NOT NULL DEFAULT 0,
      response_code integer,
      last_error text NOT NULL DEFAULT '',
      created_at timestamptz(3) NOT NULL DEFAULT clock_timestamp(),
      updated_at timestamptz(3) NOT NULL DEFAULT clock_timestamp()
    )`,
    'CREATE INDEX webhook_deliveries_by_webhook ON webhook_deliveries (webhook_id, created_at DESC, id DESC)',
    'CREATE INDEX webhook_deliveries_by_event ON webhook_deliveries (event_seq)',
    `CREATE FUNCTION berth_fan_out_event() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      WITH delivery AS (
        INSERT INTO webhook_deliveries (webhook_id, event_seq, event_type)
        SELECT w.id, NEW.seq, NEW.type FROM webhooks w
        WHERE w.account_id = NEW.account_id
          AND (cardinality(w.event_types) = 0 OR NEW.type = ANY (w.event_types))
        RETURNING id
      )
      INSERT INTO jobs (kind, subject_id, max_attempts) SELECT 'deliver_webhook', id, 8 FROM delivery;
      IF FOUND THEN
        PERFORM pg_notify('berth_jobs', '');
      END IF;
      RETURN NULL;
    END $$`,
    `CREATE TRIGGER events_fan_out AFTER INSERT ON events FOR EACH ROW EXECUTE FUNCTION berth_fan_out_event()`,
  ]);
}

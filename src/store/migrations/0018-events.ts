import type { Kysely } from 'kysely';
import { runStatements } from './run-statements.ts';

/**
 * The account's event log (GET /v1/events, webhooks): one row per state change, written by triggers in
 * the transaction that makes the change, so an event exists exactly when its change does.
 *
 * Ordering: the triggers are deferred to commit time and take an advisory lock on the account before
 * the row takes its `seq`; the lock lasts until commit. So an account's events commit in `seq` order,
 * and a reader that has seen `seq` N never finds a later-committed event of that account below N.
 * Deferring keeps the lock to the last moment of the transaction: it holds no row lock it could wait on
 * after taking it (no deadlock with the account's other writers).
 *
 * Each trigger's arguments: the event kind, how the row names its account (`account_id`, `service_id`
 * via services, `scope` via a secret's service or environment), whether an update that changes nothing
 * but `updated_at` is an event (`skip_touch`) or every write is (`every_write`), then the columns the
 * event keeps as the resource's new state. Columns left out never reach an event: sealed values,
 * generated passwords, a dependency's attributes.
 */
const RECORDED: Array<[table: string, args: string[]]> = [
  [
    'deployments',
    [
      'deployment',
      'account_id',
      'skip_touch',
      'id',
      'account_id',
      'environment_id',
      'service_id',
      'type',
      'state',
      'prev_deployment_id',
      'prov_deployment_id',
      'git_commit_ref',
      'git_commit_author',
      'git_commit_message',
      'docker_image_tag',
      'helm_chart_version',
      'helm_values_yml',
      'docker_image_digest',
      'note',
      'failure_reason',
      'created_at',
      'updated_at',
    ],
  ],
  [
    'services',
    [
      'service',
      'account_id',
      'skip_touch',
      'id',
      'account_id',
      'environment_id',
      'name',
      'state',
      'is_deleted',
      'subdomain',
      'latest_deployment_id',
      'created_at',
      'updated_at',
    ],
  ],
  [
    'custom_domains',
    [
      'custom_domain',
      'account_id',
      'skip_touch',
      'id',
      'account_id',
      'environment_id',
      'service_id',
      'domain',
      'state',
      'failure_reason',
      'created_at',
      'updated_at',
    ],
  ],
  [
    'service_resources',
    [
      'dependency',
      'service_id',
      'skip_touch',
      'service_id',
      'kind',
      'type',
      'resource_id',
      'state',
      'error',
      'provisioned_at',
      'updated_at',
    ],
  ],
  [
    'secrets',
    [
      'secret',
      'scope',
      'every_write',
      'scope',
      'scope_id',
      'key',
      'is_sensitive',
      'description',
      'updated_at',
    ],
  ],
];

export async function up(db: Kysely<unknown>): Promise<void> {
  await runStatements(db, [
    `CREATE TABLE events (
      seq bigserial PRIMARY KEY,
      account_id uuid NOT NULL,
      type text NOT NULL,
      data jsonb NOT NULL,
      at timestamptz(3) NOT NULL DEFAULT clock_timestamp()
    )`,
    'CREATE INDEX events_by_account ON events (account_id, seq)',
    'CREATE INDEX events_by_time ON events (at)',
    `CREATE FUNCTION berth_record_event() RETURNS trigger LANGUAGE plpgsql AS $$
    DECLARE
      kept text[] := TG_ARGV[3:TG_NARGS - 1];
      current_row jsonb := to_jsonb(CASE WHEN TG_OP = 'DELETE' THEN OLD ELSE NEW END);
      state jsonb;
      account uuid;
    BEGIN
      SELECT coalesce(jsonb_object_agg(k, current_row -> k), '{}') INTO state FROM unnest(kept) AS k;
      IF TG_OP = 'UPDATE' THEN
        IF (SELECT coalesce(jsonb_object_agg(k, to_jsonb(OLD) -> k), '{}') FROM unnest(kept) AS k) - 'updated_at'
            = state - 'updated_at' AND TG_ARGV[2] = 'skip_touch' THEN
          RETURN NULL;
        END IF;
      END IF;
      account := CASE TG_ARGV[1]
        WHEN 'account_id' THEN (current_row ->> 'account_id')::uuid
        WHEN 'service_id' THEN (SELECT s.account_id FROM services s WHERE s.id = (current_row ->> 'service_id')::uuid)
        ELSE CASE current_row ->> 'scope'
          WHEN 'service' THEN (SELECT s.account_id FROM services s WHERE s.id = (current_row ->> 'scope_id')::uuid)
          ELSE (SELECT e.account_id FROM environments e WHERE e.id = (current_row ->> 'scope_id')::uuid)
        END
      END;
      -- Gone with its account (a cascade): nobody is left to tell.
      IF account IS NULL THEN
        RETURN NULL;
      END IF;
      PERFORM pg_advisory_xact_lock(1702, hashtext(account::text));
      INSERT INTO events (account_id, type, data) VALUES (
        account,
        TG_ARGV[0] || '.' || CASE TG_OP WHEN 'INSERT' THEN 'created' WHEN 'UPDATE' THEN 'updated' ELSE 'deleted' END,
        state
      );
      PERFORM pg_notify('berth_events', account::text);
      RETURN NULL;
    END $$`,
    ...RECORDED.map(
      ([table, args]) =>
        `CREATE CONSTRAINT TRIGGER ${table}_record_event AFTER INSERT OR UPDATE OR DELETE ON ${table}
         DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
         EXECUTE FUNCTION berth_record_event(${args.map((a) => `'${a}'`).join(', ')})`,
    ),
  ]);
}

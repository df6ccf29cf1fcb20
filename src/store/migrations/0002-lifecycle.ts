import type { Kysely } from 'kysely';
import { runStatements } from './run-statements.ts';

export async function up(db: Kysely<unknown>): Promise<void> {
  await runStatements(db, [
    // created_at comes from clock_timestamp(): rows are inserted under the service's row lock, so the
    // timestamps follow the order in which deployments were accepted.
    `CREATE TABLE deployments (
      id uuid PRIMARY KEY,
      account_id uuid NOT NULL REFERENCES accounts(id),
      environment_id uuid NOT NULL REFERENCES environments(id),
      service_id uuid NOT NULL REFERENCES services(id),
      type text NOT NULL,
      state text NOT NULL CHECK (state IN ('queued', 'in_progress', 'success', 'failed')),
      prev_deployment_id uuid,
      prov_deployment_id text NOT NULL DEFAULT '',
      git_commit_ref text NOT NULL DEFAULT '',
      git_commit_author text NOT NULL DEFAULT '',
      git_commit_message text NOT NULL DEFAULT '',
      docker_image_tag text NOT NULL DEFAULT '',
      helm_chart_version text NOT NULL DEFAULT '',
      helm_values_yml text NOT NULL DEFAULT '',
      note text NOT NULL DEFAULT '',
      failure_reason text NOT NULL DEFAULT '',
      created_at timestamptz(3) NOT NULL DEFAULT clock_timestamp(),
      updated_at timestamptz(3) NOT NULL DEFAULT clock_timestamp()
    )`,
    'CREATE INDEX deployments_by_service ON deployments (service_id, created_at DESC, id DESC)',
    // One row per secret. scope_id is a service or an environment id. Only the value is secret: it is
    // stored as AES-256-GCM ciphertext with the id of the key that sealed it.
    `CREATE TABLE secrets (
      scope text NOT NULL CHECK (scope IN ('service', 'environment')),
      scope_id uuid NOT NULL,
      key text NOT NULL,
      value_sealed text NOT NULL,
      description text NOT NULL DEFAULT '',
      use_preview boolean NOT NULL DEFAULT false,
      is_sensitive boolean NOT NULL DEFAULT false,
      expose_to_chart boolean,
      chart_default_val text,
      dep_export boolean,
      updated_at timestamptz(3) NOT NULL DEFAULT now(),
      PRIMARY KEY (scope_id, key)
    )`,
    `CREATE TABLE jobs (
      seq bigserial PRIMARY KEY,
      kind text NOT NULL,
      subject_id uuid NOT NULL,
      queue_key uuid,
      run_after timestamptz(3) NOT NULL DEFAULT now(),
      attempts integer NOT NULL DEFAULT 0,
      max_attempts integer NOT NULL,
      locked_by text,
      locked_until timestamptz(3),
      last_error text,
      created_at timestamptz(3) NOT NULL DEFAULT now()
    )`,
    'CREATE INDEX jobs_due ON jobs (run_after, seq)',
    'CREATE INDEX jobs_by_queue ON jobs (queue_key, seq) WHERE queue_key IS NOT NULL',
    // A provider driver's tables were created here once; drivers create their own tables now.
  ]);
}

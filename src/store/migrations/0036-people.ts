import type { Kysely } from 'kysely';
import { runStatements } from './run-statements.ts';

/**
 * People (docs/access.md): users, their memberships of accounts with a role and an optional environment
 * scope, and tokens that carry a name, a role, an owner and limits. Tokens issued before (operator
 * tokens) keep working as owners of their account: role `owner`, no owner user, no scope. Audit entries
 * name the user and the token's name, and the request's user agent.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await runStatements(db, [
    `CREATE TABLE users (
    id uuid PRIMARY KEY,
    email text NOT NULL,
    display_name text NOT NULL,
    created_at timestamptz(3) NOT NULL DEFAULT now()
  )`,
    'CREATE UNIQUE INDEX users_email ON users (lower(email))',
    `CREATE TABLE memberships (
    user_id uuid NOT NULL REFERENCES users(id),
    account_id uuid NOT NULL REFERENCES accounts(id),
    role text NOT NULL CHECK (role IN ('owner', 'admin', 'developer', 'viewer')),
    environment_ids jsonb,
    created_at timestamptz(3) NOT NULL DEFAULT now(),
    PRIMARY KEY (account_id, user_id)
  )`,
    'CREATE INDEX memberships_by_user ON memberships (user_id)',
    `ALTER TABLE api_tokens
    ADD COLUMN name text,
    ADD COLUMN role text NOT NULL DEFAULT 'owner' CHECK (role IN ('owner', 'admin', 'developer', 'viewer')),
    ADD COLUMN owner_user_id uuid REFERENCES users(id),
    ADD COLUMN environment_ids jsonb,
    ADD COLUMN read_only boolean NOT NULL DEFAULT false,
    ADD COLUMN expires_at timestamptz(3),
    ADD COLUMN last_used_at timestamptz(3)`,
    `ALTER TABLE audit_logs
    ADD COLUMN user_id uuid,
    ADD COLUMN user_email text,
    ADD COLUMN token_name text,
    ADD COLUMN user_agent text`,
    'CREATE INDEX audit_logs_by_user ON audit_logs (account_id, user_id, created_at DESC, id DESC)',
  ]);
}

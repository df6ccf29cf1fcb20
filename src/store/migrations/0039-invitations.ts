import type { Kysely } from 'kysely';
import { runStatements } from './run-statements.ts';

/**
 * Invitations (docs/access.md): an owner or admin invites an email address with a role; the link (only
 * the SHA-256 of its secret is stored) works once, for a week, and accepting it makes the membership.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await runStatements(db, [
    `CREATE TABLE invitations (
    id uuid PRIMARY KEY,
    secret_hash text NOT NULL,
    account_id uuid NOT NULL REFERENCES accounts(id),
    email text NOT NULL,
    role text NOT NULL CHECK (role IN ('owner', 'admin', 'developer', 'viewer')),
    invited_by uuid REFERENCES users(id),
    created_at timestamptz(3) NOT NULL DEFAULT now(),
    expires_at timestamptz(3) NOT NULL,
    accepted_at timestamptz(3)
  )`,
    'CREATE UNIQUE INDEX invitations_by_secret ON invitations (secret_hash)',
    'CREATE INDEX invitations_by_account ON invitations (account_id, created_at DESC)',
  ]);
}

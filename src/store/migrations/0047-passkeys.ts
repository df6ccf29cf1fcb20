import type { Kysely } from 'kysely';
import { runStatements } from './run-statements.ts';

/**
 * Passkeys (WebAuthn, docs/access.md): a user's credentials (the authenticator's public key, never a
 * secret) and the challenges of ceremonies under way. Challenges live in the database, not in a process's
 * memory, so that a ceremony begun on one Berth process may end on another; each is used once.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await runStatements(db, [
    `CREATE TABLE passkeys (
    id uuid PRIMARY KEY,
    user_id uuid NOT NULL REFERENCES users(id),
    credential_id text NOT NULL,
    public_key text NOT NULL,
    counter bigint NOT NULL,
    transports jsonb NOT NULL,
    name text NOT NULL,
    created_at timestamptz(3) NOT NULL DEFAULT now(),
    last_used_at timestamptz(3)
  )`,
    'CREATE UNIQUE INDEX passkeys_by_credential ON passkeys (credential_id)',
    'CREATE INDEX passkeys_by_user ON passkeys (user_id, created_at)',
    `CREATE TABLE webauthn_challenges (
    challenge text PRIMARY KEY,
    purpose text NOT NULL CHECK (purpose IN ('registration', 'authentication')),
    user_id uuid REFERENCES users(id),
    expires_at timestamptz(3) NOT NULL
  )`,
    'CREATE INDEX webauthn_challenges_by_expiry ON webauthn_challenges (expires_at)',
  ]);
}

import type { Kysely } from 'kysely';
import { runStatements } from './run-statements.ts';

/**
 * People sign in (docs/access.md): a password per user (argon2id, never the password itself), sessions
 * held by a browser's cookie (stored as the cookie's SHA-256, like tokens), each acting in one account
 * as the user's membership there, and one-time sign-in links that let a user in once (and set a password).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await runStatements(db, [
    'ALTER TABLE users ADD COLUMN password_hash text',
    `CREATE TABLE sessions (
    id uuid PRIMARY KEY,
    secret_hash text NOT NULL,
    user_id uuid NOT NULL REFERENCES users(id),
    account_id uuid NOT NULL REFERENCES accounts(id),
    created_at timestamptz(3) NOT NULL DEFAULT now(),
    last_seen_at timestamptz(3) NOT NULL DEFAULT now(),
    expires_at timestamptz(3) NOT NULL,
    ended_at timestamptz(3),
    user_agent text,
    client_address text
  )`,
    'CREATE UNIQUE INDEX sessions_by_secret ON sessions (secret_hash)',
    'CREATE INDEX sessions_by_user ON sessions (user_id, created_at DESC)',
    `CREATE TABLE sign_in_links (
    id uuid PRIMARY KEY,
    secret_hash text NOT NULL,
    user_id uuid NOT NULL REFERENCES users(id),
    account_id uuid NOT NULL REFERENCES accounts(id),
    created_at timestamptz(3) NOT NULL DEFAULT now(),
    expires_at timestamptz(3) NOT NULL,
    used_at timestamptz(3)
  )`,
    'CREATE UNIQUE INDEX sign_in_links_by_secret ON sign_in_links (secret_hash)',
  ]);
}

import type { Kysely } from 'kysely';
import { runStatements } from './run-statements.ts';

/**
 * `berth login` through the OAuth 2.0 Device Authorization Grant (RFC 8628, docs/access.md): a CLI asks
 * for a pair of codes, a signed-in person approves or denies the short one in the console, and the CLI,
 * polling with the long one, receives a token of that person once. Both codes are stored as their
 * SHA-256 only. The token is made when the CLI collects it, never stored: nothing here is a credential.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await runStatements(db, [
    `CREATE TABLE device_logins (
    id uuid PRIMARY KEY,
    device_code_hash text NOT NULL,
    user_code_hash text NOT NULL,
    client_id text NOT NULL,
    device_name text,
    client_address text,
    user_agent text,
    created_at timestamptz(3) NOT NULL DEFAULT now(),
    expires_at timestamptz(3) NOT NULL,
    interval_s integer NOT NULL,
    last_polled_at timestamptz(3),
    state text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'approved', 'denied', 'collected')),
    account_id uuid REFERENCES accounts(id),
    user_id uuid REFERENCES users(id),
    decided_at timestamptz(3),
    token_id uuid
  )`,
    'CREATE UNIQUE INDEX device_logins_by_device_code ON device_logins (device_code_hash)',
    'CREATE UNIQUE INDEX device_logins_by_user_code ON device_logins (user_code_hash)',
    'CREATE INDEX device_logins_by_expiry ON device_logins (expires_at)',
  ]);
}

import type { Kysely } from 'kysely';
import { runStatements } from './run-statements.ts';

/**
 * OpenID Connect single sign-on per account (docs/sso.md).
 *
 * - `sso_configs`: one provider per account; the client secret is sealed with the master key, as secrets
 *   are (store/key-rotation.ts re-seals it).
 * - `sso_flows`: sign-ins under way, between the redirect to the provider and its callback: in the
 *   database, so that any Berth process takes the callback. Keyed by the SHA-256 of the state; taken
 *   (deleted) by the callback, so a state works once; ten minutes at most. The PKCE verifier is never
 *   stored: it is the browser's own cookie, and only its S256 challenge is kept here, which also binds the
 *   flow to the browser that started it.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await runStatements(db, [
    `CREATE TABLE sso_configs (
      account_id uuid PRIMARY KEY REFERENCES accounts(id) ON DELETE CASCADE,
      issuer_url text NOT NULL,
      client_id text NOT NULL,
      client_secret_sealed text NOT NULL,
      allowed_domains jsonb NOT NULL,
      default_role text NOT NULL CHECK (default_role IN ('owner', 'admin', 'developer', 'viewer')),
      enabled boolean NOT NULL,
      created_at timestamptz(3) NOT NULL DEFAULT now(),
      updated_at timestamptz(3) NOT NULL DEFAULT now()
    )`,
    `CREATE TABLE sso_flows (
      state_hash text PRIMARY KEY,
      account_id uuid NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
      code_challenge text NOT NULL,
      nonce text NOT NULL,
      redirect_uri text NOT NULL,
      created_at timestamptz(3) NOT NULL DEFAULT now(),
      expires_at timestamptz(3) NOT NULL
    )`,
    'CREATE INDEX sso_flows_by_expiry ON sso_flows (expires_at)',
  ]);
}

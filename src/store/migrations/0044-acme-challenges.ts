import type { Kysely } from 'kysely';
import { runStatements } from './run-statements.ts';

/**
 * The challenges besides HTTP-01 (jobs/acme-challenges.ts):
 *
 * - `acme_challenges.type`: TLS-ALPN-01 answers are looked up by name (the SNI of the CA's handshake),
 *   HTTP-01 ones by token; `alpn_certificate` / `alpn_key` (sealed) are the self-signed certificate the
 *   ingress answers the CA's `acme-tls/1` handshake with, made once by the order.
 * - `ingress_certificates`: wildcard certificates of the ingress domain (`*.{BERTH_INGRESS_HOST}`),
 *   ordered by DNS-01 through RFC 2136 (BERTH_ACME_DNS_*); they belong to no custom domain, so they have
 *   a table of their own with the same lifecycle columns as `certificates`.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await runStatements(db, [
    `ALTER TABLE acme_challenges
       ADD COLUMN type text NOT NULL DEFAULT 'http-01' CHECK (type IN ('http-01', 'tls-alpn-01')),
       ADD COLUMN alpn_certificate text,
       ADD COLUMN alpn_key text`,
    'CREATE INDEX acme_challenges_by_name ON acme_challenges (name)',
    `CREATE TABLE ingress_certificates (
      id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
      name text NOT NULL UNIQUE,
      status text NOT NULL CHECK (status IN ('pending', 'issued', 'failed', 'renewing')),
      issuer text,
      not_before timestamptz(3),
      not_after timestamptz(3),
      renew_after timestamptz(3),
      last_error text,
      failures integer NOT NULL DEFAULT 0,
      next_attempt_at timestamptz(3),
      cert_pem text,
      private_key text,
      order_url text,
      order_key text,
      created_at timestamptz(3) NOT NULL DEFAULT now(),
      updated_at timestamptz(3) NOT NULL DEFAULT now()
    )`,
  ]);
}

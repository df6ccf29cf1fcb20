import type { Kysely } from 'kysely';
import { runStatements } from './run-statements.ts';

/**
 * Certificates of custom domains, obtained by ACME (jobs/certificates.ts), and what ACME needs meanwhile.
 * Keys and certificates are sealed with the master key, as secrets are. One row per custom domain (its
 * name may be added again later, by another service: a new row, a new order).
 *
 * - `certificates.order_url` / `order_key`: the order in flight and the key its CSR is made with, written
 *   before the order's challenges are answered, so a run that dies mid-order resumes the same order.
 * - `acme_accounts`: one account key per ACME directory, shared by every process.
 * - `acme_challenges`: HTTP-01 answers the ingress serves (any process's ingress answers any token).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await runStatements(db, [
    `CREATE TABLE certificates (
      custom_domain_id uuid PRIMARY KEY REFERENCES custom_domains (id) ON DELETE CASCADE,
      service_id uuid NOT NULL,
      name text NOT NULL,
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
    'CREATE INDEX certificates_by_name ON certificates (name)',
    `CREATE TABLE acme_accounts (
      directory_url text PRIMARY KEY,
      account_key text NOT NULL,
      created_at timestamptz(3) NOT NULL DEFAULT now()
    )`,
    `CREATE TABLE acme_challenges (
      token text PRIMARY KEY,
      key_authorization text NOT NULL,
      name text NOT NULL,
      created_at timestamptz(3) NOT NULL DEFAULT now()
    )`,
    // The custom domain's read shows its certificate: the read cache hears of every change.
    `CREATE TRIGGER certificates_notify_change AFTER INSERT OR UPDATE OR DELETE ON certificates
     FOR EACH ROW EXECUTE FUNCTION berth_notify_change('service', 'service_id')`,
  ]);
}

import type { Kysely } from 'kysely';
import { runStatements } from './run-statements.ts';

/**
 * The API's own certificate, by ACME, for BERTH_TLS_ACME_NAME (jobs/api-certificate.ts): one row per
 * name, the columns of `certificates` without a custom domain. Sealed like them, shared by every process.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await runStatements(db, [
    `CREATE TABLE api_certificates (
      name text PRIMARY KEY,
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

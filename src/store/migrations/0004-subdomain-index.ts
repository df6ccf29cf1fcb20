import type { Kysely } from 'kysely';
import { runStatements } from './run-statements.ts';

export async function up(db: Kysely<unknown>): Promise<void> {
  await runStatements(db, [
    // A provider driver's table was created here once; drivers create their own tables now.
    // Subdomains are chosen unique across environments (they may share an ingress); looked up by it.
    'CREATE INDEX services_by_subdomain ON services (subdomain) WHERE NOT is_deleted',
  ]);
}

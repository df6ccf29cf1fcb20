import { type Kysely, sql } from 'kysely';

/** One statement per call: PGlite's extended protocol, like Postgres's, refuses several in one query. */
export async function runStatements(db: Kysely<unknown>, statements: string[]): Promise<void> {
  for (const statement of statements) await sql.raw(statement).execute(db);
}

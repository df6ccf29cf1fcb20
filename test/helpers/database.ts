import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';

/**
 * Every test file gets a database of its own: a fresh temporary directory for the embedded database, or
 * a fresh Postgres database, chosen by BERTH_TEST_DATABASE (embedded | postgres). Files run in parallel.
 */
export const TEST_DATABASE = process.env.BERTH_TEST_DATABASE === 'postgres' ? 'postgres' : 'embedded';
const ADMIN_URL = process.env.BERTH_TEST_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

export interface TestDatabase {
  databaseUrl: string | undefined;
  dataDir: string;
  drop(): Promise<void>;
}

/** A database of the run's kind, or of `kind` for a test of one kind's own behaviour. */
export async function createTestDatabase(
  kind: 'embedded' | 'postgres' = TEST_DATABASE,
): Promise<TestDatabase> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-test-'));
  if (kind === 'embedded') {
    return {
      databaseUrl: undefined,
      dataDir,
      drop: async () => fs.rmSync(dataDir, { recursive: true, force: true }),
    };
  }
  const database = await createPostgresDatabase(ADMIN_URL, 'berth_test', 'BERTH_TEST_POSTGRES_URL');
  return {
    databaseUrl: database.url,
    dataDir,
    drop: async () => {
      await database.drop();
      fs.rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/**
 * A new Postgres database `<prefix>_<random>` made through `adminUrl`: its URL, and `drop` for the
 * caller's cleanup. `setting` names where the admin URL comes from, for the message when it cannot be reached.
 */
export async function createPostgresDatabase(
  adminUrl: string,
  prefix: string,
  setting: string,
): Promise<{ url: string; drop: () => Promise<void> }> {
  const name = `${prefix}_${randomBytes(6).toString('hex')}`;
  const admin = async (statement: string) => {
    const client = new pg.Client({ connectionString: adminUrl });
    await client.connect().catch((error: Error) => {
      throw new Error(`cannot reach Postgres at ${adminUrl} (set ${setting}): ${error.message}`);
    });
    try {
      await client.query(statement);
    } finally {
      await client.end();
    }
  };
  await admin(`CREATE DATABASE ${name}`);
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  return { url: url.toString(), drop: () => admin(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`) };
}

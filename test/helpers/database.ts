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
  const name = `berth_test_${randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: ADMIN_URL });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  const url = new URL(ADMIN_URL);
  url.pathname = `/${name}`;
  return {
    databaseUrl: url.toString(),
    dataDir,
    drop: async () => {
      const client = new pg.Client({ connectionString: ADMIN_URL });
      await client.connect();
      await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await client.end();
      fs.rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

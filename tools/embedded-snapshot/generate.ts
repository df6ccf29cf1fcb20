/**
 * Writes src/store/embedded-snapshot/: a PGlite data directory after initdb and every migration
 * (pgdata.tgz) and what made it (meta.json). A new embedded data directory is loaded from it instead of
 * running initdb and the migrations (src/store/embedded-snapshot.ts). Run after adding a migration or
 * upgrading PGlite: `npm run generate:snapshot`. A stale snapshot is still correct (the newer migrations
 * run at start, and another PGlite's snapshot is not used), only slower to start from.
 */
import fs from 'node:fs';
import path from 'node:path';
import { PGlite } from '@electric-sql/pglite';
import { Kysely, PGliteDialect, sql } from 'kysely';
import {
  embeddedStartParams,
  installedPgliteVersion,
  SNAPSHOT_FILE,
  SNAPSHOT_META_FILE,
  type SnapshotMeta,
} from '../../src/store/embedded-snapshot.ts';
import { migrateToLatest } from '../../src/store/migrate.ts';
import type { Database } from '../../src/store/schema.ts';

const pglite = await PGlite.create({ startParams: embeddedStartParams(PGlite) });
const db = new Kysely<Database>({ dialect: new PGliteDialect({ pglite }) });
await migrateToLatest(db);
const applied = await sql<{ name: string }>`SELECT name FROM kysely_migration ORDER BY name`.execute(db);
// Berth uses the database `postgres` only and never creates one: without the two template databases a
// new data directory has about 600 fewer files to create (of 1,100), which was half of loading it.
await sql`UPDATE pg_database SET datistemplate = false WHERE datname IN ('template0', 'template1')`.execute(
  db,
);
await sql`DROP DATABASE template0`.execute(db);
await sql`DROP DATABASE template1`.execute(db);
// Everything on disk and nothing left to replay from the WAL when the copy first starts.
await sql`CHECKPOINT`.execute(db);
const tarball = await pglite.dumpDataDir('gzip');
await db.destroy();

const meta: SnapshotMeta = { pglite: installedPgliteVersion(), migrations: applied.rows.map((r) => r.name) };
fs.mkdirSync(path.dirname(SNAPSHOT_FILE), { recursive: true });
fs.writeFileSync(SNAPSHOT_FILE, Buffer.from(await tarball.arrayBuffer()));
fs.writeFileSync(SNAPSHOT_META_FILE, `${JSON.stringify(meta, null, 2)}\n`);
process.stdout.write(`wrote ${SNAPSHOT_FILE}: PGlite ${meta.pglite}, ${meta.migrations.length} migrations\n`);

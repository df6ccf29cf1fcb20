import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';
import { sql } from 'kysely';
import { openStore } from './database.ts';
import { installedPgliteVersion, readSnapshotMeta, snapshotFor } from './embedded-snapshot.ts';
import { KNOWN_MIGRATIONS } from './migrate.ts';

// The snapshot is the embedded database's: these tests open one whatever BERTH_TEST_DATABASE says.
const tempDirs: string[] = [];
function tempDir(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-snapshot-'));
  tempDirs.push(dir);
  return dir;
}
after(() => {
  for (const dir of tempDirs) fs.rmSync(dir, { recursive: true, force: true });
});

test('the snapshot was made by the installed PGlite (else every new data directory runs initdb)', () => {
  assert.equal(
    readSnapshotMeta()?.pglite,
    installedPgliteVersion(),
    'src/store/embedded-snapshot/ is missing or stale: run npm run generate:snapshot',
  );
});

test('the snapshot holds every migration (else each new data directory runs the missing ones at start)', () => {
  // 21 migrations missing from it cost about 1 of the 5 CPU seconds of a start (docs/performance.md).
  assert.deepEqual(
    readSnapshotMeta()?.migrations,
    [...KNOWN_MIGRATIONS].sort(),
    'src/store/embedded-snapshot/ is stale: run npm run generate:snapshot',
  );
});

test('a new data directory is loaded from the snapshot: only the migrations it lacks run at start', async () => {
  const dataDir = tempDir();
  assert.ok(snapshotFor(path.join(dataDir, 'pgdata')) instanceof Blob);
  const opened = new Date();
  const store = await openStore({ databaseUrl: undefined, dataDir });
  try {
    const inSnapshot = new Set(readSnapshotMeta()?.migrations);
    const all = await sql<{ name: string; ranNow: boolean }>`
      SELECT name, timestamp >= ${opened} AS "ranNow" FROM kysely_migration ORDER BY name`.execute(store.db);
    assert.ok(inSnapshot.size > 0);
    // Made by initdb and the migrations, every one would have run now.
    assert.deepEqual(
      all.rows.filter((r) => r.ranNow).map((r) => r.name),
      all.rows.map((r) => r.name).filter((name) => !inSnapshot.has(name)),
    );
  } finally {
    await store.close();
  }
});

test('an existing data directory is opened as it is, never loaded over', async () => {
  const dataDir = tempDir();
  const first = await openStore({ databaseUrl: undefined, dataDir });
  await sql`CREATE TABLE kept (id int)`.execute(first.db);
  await sql`INSERT INTO kept VALUES (7)`.execute(first.db);
  await first.close();
  assert.equal(snapshotFor(path.join(dataDir, 'pgdata')), undefined);
  const again = await openStore({ databaseUrl: undefined, dataDir });
  try {
    const rows = await sql<{ id: number }>`SELECT id FROM kept`.execute(again.db);
    assert.deepEqual(rows.rows, [{ id: 7 }]);
  } finally {
    await again.close();
  }
});

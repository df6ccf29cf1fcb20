import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import v8 from 'node:v8';
import { sql } from 'kysely';
import { openStore } from './database.ts';

// The embedded database's, whatever BERTH_TEST_DATABASE says; its own file, so its own process: the
// figure read is this process's peak.
test("opening and using the embedded database keeps V8's scratch memory small (no optimizing tier-up)", async (ctx) => {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-embedded-memory-'));
  ctx.after(() => fs.rmSync(dataDir, { recursive: true, force: true }));
  const store = await openStore({ databaseUrl: undefined, dataDir });
  try {
    // Enough statements for hot functions to have tiered up if they could.
    for (let i = 0; i < 300; i++) {
      await sql`SELECT relname FROM pg_class ORDER BY relname LIMIT 5`.execute(store.db);
    }
  } finally {
    await store.close();
  }
  // With tier-up, compiling PGlite's hot functions peaks at ~600 MB of memory the C allocator keeps.
  const peakMb = v8.getHeapStatistics().peak_malloced_memory / 1024 / 1024;
  assert.ok(peakMb < 100, `V8 peaked at ${Math.round(peakMb)} MB of malloced memory`);
});

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { openStore } from './database.ts';

test('a BERTH_DATABASE_URL no database answers at is named (without its password), not taken for a failed migration', async () => {
  // A port of this helper's own range that nothing listens on.
  await assert.rejects(
    openStore({
      databaseUrl: 'postgres://berth:hunter2-secret@127.0.0.1:47399/berth',
      dataDir: '/nonexistent',
    }),
    (error: Error) => {
      assert.match(
        error.message,
        /^cannot use the database of BERTH_DATABASE_URL \(berth@127\.0\.0\.1:47399\/berth\): .*ECONNREFUSED/,
      );
      assert.doesNotMatch(error.message, /hunter2|migration/);
      return true;
    },
  );
});

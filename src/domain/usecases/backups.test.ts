import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import type { Store } from '../../store/database.ts';
import { scheduledBackup } from './backups.ts';

// The directory is refused before the database is read: no store is needed to see it.
const NO_STORE = {} as Store;

test('a scheduled backup into a BERTH_BACKUP_DIR that is a file says so, not EEXIST from mkdir', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-backup-dir-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'backups');
  fs.writeFileSync(file, 'not a directory');
  await assert.rejects(scheduledBackup(NO_STORE, file, 7), {
    message: `BERTH_BACKUP_DIR ${file} is not a directory`,
  });
  await assert.rejects(scheduledBackup(NO_STORE, path.join(file, 'nightly'), 7), {
    message: `BERTH_BACKUP_DIR ${path.join(file, 'nightly')} cannot be made: ${file} is not a directory`,
  });
  assert.equal(fs.readFileSync(file, 'utf8'), 'not a directory');
});

import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { loadConfig } from './config.ts';

test('a BERTH_DATA_DIR that is a file, or lies under one, stops the start naming it (not an unexpected EEXIST)', (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-data-dir-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'berth');
  fs.writeFileSync(file, 'a file');
  assert.throws(() => loadConfig({ BERTH_DATA_DIR: file }), {
    message: `BERTH_DATA_DIR ${file} is not a directory: name a directory (made if missing)`,
  });
  assert.throws(() => loadConfig({ BERTH_DATA_DIR: path.join(file, 'data') }), {
    message: `BERTH_DATA_DIR ${path.join(file, 'data')} cannot be made: ${file} is not a directory`,
  });
  assert.equal(
    loadConfig({ BERTH_DATA_DIR: path.join(dir, 'new', 'data') }).dataDir,
    path.join(dir, 'new', 'data'),
  );
  assert.equal(fs.existsSync(path.join(dir, 'new')), false, 'nothing made before it is used');
});

import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import zlib from 'node:zlib';
import { publish, readBackupFile } from './backup-file.ts';

test('a gzip file of other JSON lines is refused as no Berth backup, never with a JavaScript error', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-backup-file-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const files: [string, string][] = [
    ['null.ndjson.gz', 'null\n{}\n'],
    ['other.ndjson.gz', '{"x":1}\n{"y":2}\n'],
    ['list.ndjson.gz', '[1,2]\n'],
    ['one-line.ndjson.gz', '{"x":1}\n'],
  ];
  for (const [name, text] of files) {
    const file = path.join(dir, name);
    fs.writeFileSync(file, zlib.gzipSync(text));
    await assert.rejects(readBackupFile(file), {
      message: `${file} is not a Berth backup (its first line is no Berth backup manifest)`,
    });
  }
});

test('a backup whose last line is not a trailer is refused as cut short, never with a JavaScript error', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-backup-file-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  for (const last of ['null', '7', '{"table":"accounts"}']) {
    const file = path.join(dir, 'cut.ndjson.gz');
    fs.writeFileSync(file, zlib.gzipSync(`{"berth_backup":1}\n${last}\n`));
    await assert.rejects(readBackupFile(file), {
      message: `${file} is not a complete Berth backup: it ends before its trailer`,
    });
  }
});

test('where the file system keeps no hard links, a finished backup is renamed into place, never over a file', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-publish-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const noLinks = async () => {
    throw Object.assign(new Error('EPERM: operation not permitted, link'), { code: 'EPERM' });
  };
  const partial = path.join(dir, '.a.partial');
  const file = path.join(dir, 'a.ndjson.gz');
  fs.writeFileSync(partial, 'backup');
  await publish(partial, file, noLinks);
  assert.equal(fs.readFileSync(file, 'utf8'), 'backup');
  assert.equal(fs.existsSync(partial), false);

  fs.writeFileSync(partial, 'another');
  await assert.rejects(publish(partial, file, noLinks), { code: 'EEXIST' });
  assert.equal(fs.readFileSync(file, 'utf8'), 'backup', 'the file there is kept');

  // Any other failure of the link is the backup's failure, as it was.
  const broken = async () => {
    throw Object.assign(new Error('EIO: i/o error, link'), { code: 'EIO' });
  };
  await assert.rejects(publish(partial, path.join(dir, 'b.ndjson.gz'), broken), { code: 'EIO' });
  assert.equal(fs.existsSync(path.join(dir, 'b.ndjson.gz')), false);
});

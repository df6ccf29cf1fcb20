import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import type { AdminClient } from '../client/http-client.ts';
import { partialName, withTrailer, writeBackupFile } from '../store/backup-file.ts';
import { downloadBackup } from './backups.ts';

/**
 * An admin client whose server answers `body` as the backup, counting the snapshots it was asked for;
 * `whileSending` runs once the download has begun, after every check made before it.
 */
function serverAnswering(body: Buffer, whileSending = () => {}) {
  const asked = { snapshots: 0 };
  const client = {
    backup: async () => {
      asked.snapshots += 1;
      const stream = new ReadableStream<Uint8Array>(
        {
          pull(controller) {
            whileSending();
            controller.enqueue(new Uint8Array(body));
            controller.close();
          },
          // Pulled only when read: by the download, not by the stream's construction.
        },
        { highWaterMark: 0 },
      );
      return new Response(stream, {
        headers: { 'content-disposition': 'attachment; filename="berth-backup-x.ndjson.gz"' },
      });
    },
  } as unknown as AdminClient;
  return { client, asked };
}

async function aBackup(dir: string): Promise<Buffer> {
  const file = path.join(dir, 'source.ndjson.gz');
  const lines = async function* () {
    yield `${JSON.stringify({ berth_backup: 1, created_at: '2026-01-01T00:00:00.000Z', migration: 'm' })}\n`;
  };
  await writeBackupFile(file, withTrailer(lines(), {}));
  return fs.readFileSync(file);
}

test('berth admin backup into a file that exists refuses before the server reads its database', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-cli-backup-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const existing = path.join(dir, 'kept.ndjson.gz');
  fs.writeFileSync(existing, 'an older backup');
  const { client, asked } = serverAnswering(await aBackup(dir));
  await assert.rejects(downloadBackup(client, existing), {
    message: `${existing} exists: name another file`,
  });
  assert.equal(asked.snapshots, 0);
  assert.equal(fs.readFileSync(existing, 'utf8'), 'an older backup');
});

test('berth admin backup that cannot write its file names the file and the reason, not a hidden partial file', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-cli-backup-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const target = path.join(dir, 'nightly.ndjson.gz');
  // The partial file's name leads nowhere: its open fails, for root too.
  fs.symlinkSync(path.join(dir, 'gone', 'x'), partialName(target));
  const { client } = serverAnswering(await aBackup(dir));
  await assert.rejects(downloadBackup(client, target), (error: Error) => {
    assert.equal(
      error.message,
      `cannot write ${target} (ENOENT): check that its directory is writable and has room; nothing was written`,
    );
    return true;
  });
  assert.equal(fs.existsSync(target), false);
});

test('berth admin backup keeps a file that appears under its name while the backup downloads', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-cli-backup-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const target = path.join(dir, 'nightly.ndjson.gz');
  const { client } = serverAnswering(await aBackup(dir), () => fs.writeFileSync(target, 'written meanwhile'));
  await assert.rejects(downloadBackup(client, target), { message: `${target} exists: name another file` });
  assert.equal(fs.readFileSync(target, 'utf8'), 'written meanwhile');
  assert.equal(fs.existsSync(partialName(target)), false);
});

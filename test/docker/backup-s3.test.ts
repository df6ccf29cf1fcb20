import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { GetObjectCommand, ListObjectsV2Command, S3Client } from '@aws-sdk/client-s3';
import type { BackupS3Target } from '../../src/config.ts';
import { scheduledS3Backup } from '../../src/domain/usecases/backup-s3.ts';
import { readBackupFile } from '../../src/store/backup-file.ts';
import { openStore, type Store } from '../../src/store/database.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/database.ts';
import { buildDependencyImages } from '../helpers/dependency-images.ts';
import { docker, freePort, requireDocker } from '../helpers/docker.ts';
import { pollUntil } from '../helpers/poll.ts';

/**
 * Scheduled backups into an S3-compatible bucket (BERTH_BACKUP_S3_URL, docs/operations.md): the
 * docker provider's S3 image (s3rver) as the bucket. Each backup is one whole object; retention keeps
 * the newest; an unreachable endpoint or a missing bucket fails with its reason and deletes nothing.
 */
const BUCKET = 'berth-backups';
const KEY_ID = 'AKIABERTHBACKUPTEST';
const SECRET = 'secret-of-the-backup-test';
let container: Awaited<ReturnType<typeof docker.createContainer>>;
let endpoint: string;
let db: TestDatabase;
let store: Store;
let s3: S3Client;
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-s3-backup-'));

before(async () => {
  await requireDocker();
  await buildDependencyImages();
  const port = await freePort();
  container = await docker.createContainer({
    Image: 'berth-deps/s3:latest',
    Env: [`S3_BUCKET=${BUCKET}`, `S3_ACCESS_KEY_ID=${KEY_ID}`, `S3_SECRET_ACCESS_KEY=${SECRET}`],
    HostConfig: {
      PortBindings: { '4568/tcp': [{ HostIp: '127.0.0.1', HostPort: String(port) }] },
      AutoRemove: true,
    },
    ExposedPorts: { '4568/tcp': {} },
  });
  await container.start();
  endpoint = `http://127.0.0.1:${port}`;
  process.env.AWS_ACCESS_KEY_ID = KEY_ID;
  process.env.AWS_SECRET_ACCESS_KEY = SECRET;
  s3 = new S3Client({ region: 'us-east-1', endpoint, forcePathStyle: true });
  await pollUntil('the bucket to answer', async () => {
    await s3.send(new ListObjectsV2Command({ Bucket: BUCKET }));
    return true;
  });
  // No Berth process, only its store: a database of its own from the shared set-up's lowest piece.
  db = await createTestDatabase();
  store = await openStore({ databaseUrl: db.databaseUrl, dataDir: db.dataDir });
});
after(async () => {
  s3?.destroy();
  await store?.close();
  await db?.drop();
  await container?.stop().catch(() => {});
  fs.rmSync(dir, { recursive: true, force: true });
});

const target = (over: Partial<BackupS3Target> = {}): BackupS3Target => ({
  bucket: BUCKET,
  prefix: 'nightly/',
  endpoint,
  region: 'us-east-1',
  ...over,
});

async function keys(): Promise<string[]> {
  const listed = await s3.send(new ListObjectsV2Command({ Bucket: BUCKET, Prefix: 'nightly/' }));
  return (listed.Contents ?? []).map((o) => o.Key as string).sort();
}

test('each backup is one object in the bucket; retention keeps the newest; a failure says why and deletes nothing', async () => {
  for (let day = 1; day <= 3; day++) {
    const { file } = await scheduledS3Backup(store, target(), 2, new Date(`2031-02-0${day}T03:00:00Z`));
    assert.equal(file, `s3://${BUCKET}/nightly/berth-backup-2031-02-0${day}T03-00-00-000Z.ndjson.gz`);
  }
  const kept = await keys();
  assert.deepEqual(kept, [
    'nightly/berth-backup-2031-02-02T03-00-00-000Z.ndjson.gz',
    'nightly/berth-backup-2031-02-03T03-00-00-000Z.ndjson.gz',
  ]);
  // What the bucket holds is a whole backup.
  const object = await s3.send(new GetObjectCommand({ Bucket: BUCKET, Key: kept[1] }));
  const local = path.join(dir, 'downloaded.ndjson.gz');
  fs.writeFileSync(
    local,
    await (object.Body as { transformToByteArray(): Promise<Uint8Array> }).transformToByteArray(),
  );
  assert.equal((await readBackupFile(local)).manifest.created_at, '2031-02-03T03:00:00.000Z');

  const unreachable = await freePort();
  await assert.rejects(
    scheduledS3Backup(store, target({ endpoint: `http://127.0.0.1:${unreachable}` }), 1),
    (error: Error) =>
      error.message.startsWith(`s3://${BUCKET}/nightly/: `) && /ECONNREFUSED|connect/i.test(error.message),
  );
  await assert.rejects(
    scheduledS3Backup(store, target({ bucket: 'no-such-bucket' }), 1),
    /s3:\/\/no-such-bucket\/nightly\/: .*bucket/i,
  );
  assert.deepEqual(await keys(), kept, 'nothing deleted');
});

import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { BackupS3Target } from '../../config.ts';
import type { Store } from '../../store/database.ts';
import { BACKUP_FILE, backupFileName, takeBackup } from './backups.ts';

/**
 * One scheduled backup into an S3-compatible bucket, then retention there. The file is made in the
 * temporary directory and uploaded in one PutObject, which S3 stores whole or not at all: an
 * interrupted upload leaves no object. Credentials come from the AWS SDK's usual chain
 * (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, a profile, an instance role). Older backups beyond
 * `keep` are deleted only once the new one is stored; a failure throws its reason and deletes nothing.
 */
export async function scheduledS3Backup(
  store: Store,
  target: BackupS3Target,
  keep: number,
  now = new Date(),
): Promise<{ file: string; removed: string[] }> {
  // Loaded only when a bucket is the target: the SDK is large.
  const { S3Client, PutObjectCommand, ListObjectsV2Command, DeleteObjectCommand } = await import(
    '@aws-sdk/client-s3'
  );
  const client = new S3Client({
    region: target.region,
    ...(target.endpoint ? { endpoint: target.endpoint, forcePathStyle: true } : {}),
    maxAttempts: 3,
    // Plain PutObject bodies: S3-compatible services that do not read the SDK's aws-chunked checksum
    // framing would store the framing in the object.
    requestChecksumCalculation: 'WHEN_REQUIRED',
    responseChecksumValidation: 'WHEN_REQUIRED',
    // The SDK would print its own warnings to the console: a failure is thrown, and the caller logs it.
    logger: { debug() {}, info() {}, warn() {}, error() {} },
  });
  const where = `s3://${target.bucket}/${target.prefix}`;
  const dir = await fs.promises.mkdtemp(path.join(os.tmpdir(), 'berth-backup-'));
  try {
    const name = backupFileName(now);
    const file = path.join(dir, name);
    await takeBackup(store, file, now);
    const key = `${target.prefix}${name}`;
    await client
      .send(
        new PutObjectCommand({
          Bucket: target.bucket,
          Key: key,
          Body: fs.createReadStream(file),
          ContentLength: (await fs.promises.stat(file)).size,
          ContentType: 'application/gzip',
        }),
      )
      .catch((error: Error) => {
        throw new Error(`${where}: ${error.message || error.name}`);
      });
    const keys: string[] = [];
    let token: string | undefined;
    do {
      const page = await client.send(
        new ListObjectsV2Command({ Bucket: target.bucket, Prefix: target.prefix, ContinuationToken: token }),
      );
      for (const object of page.Contents ?? []) {
        const key = object.Key ?? '';
        if (BACKUP_FILE.test(key.slice(target.prefix.length))) keys.push(key);
      }
      token = page.IsTruncated ? page.NextContinuationToken : undefined;
    } while (token);
    keys.sort();
    const removed = keys.slice(0, Math.max(0, keys.length - keep));
    for (const old of removed)
      await client.send(new DeleteObjectCommand({ Bucket: target.bucket, Key: old }));
    return { file: `s3://${target.bucket}/${key}`, removed };
  } finally {
    client.destroy();
    await fs.promises.rm(dir, { recursive: true, force: true });
  }
}

import fs from 'node:fs';
import path from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { ReadableStream } from 'node:stream/web';
import type { AdminClient } from '../client/http-client.ts';
import { loadConfig } from '../config.ts';
import { partialName, readBackupFile, writeAtomically } from '../store/backup-file.ts';

const exists = (file: string) => new Error(`${file} exists: name another file`);

/**
 * `berth admin backup [file]`: the running server's snapshot (GET /admin/v1/backup), written under a
 * hidden partial name, checked against its own checksum, flushed to disk and only then linked as
 * `file`: a backup killed halfway, or cut short by the network, never stands under the final name, and
 * never replaces a file there.
 */
export async function downloadBackup(client: AdminClient, file: string | undefined) {
  // Checked before the server takes a snapshot: `dir/` names a directory (never a file called dir),
  // and a file's directory must exist.
  const isDirectory = (name: string) => fs.statSync(name, { throwIfNoEntry: false })?.isDirectory();
  const intoDirectory = file === undefined || isDirectory(file) || /[/\\]$/.test(file);
  const directory = path.resolve(intoDirectory ? (file ?? '.') : path.dirname(file));
  if (!isDirectory(directory)) throw new Error(`no directory ${directory}: create it first`);
  // A named file that exists is refused before the server reads its whole database for nothing.
  if (!intoDirectory && fs.existsSync(path.resolve(file))) throw exists(path.resolve(file));
  const response = await client.backup();
  const offered = /filename="([^"/\\]+)"/.exec(response.headers.get('content-disposition') ?? '')?.[1];
  const name = offered ?? 'berth-backup.ndjson.gz';
  const target = intoDirectory ? path.join(directory, name) : path.resolve(file);
  if (fs.existsSync(target)) throw exists(target);
  if (!response.body) throw new Error('the server sent no backup');
  const body = Readable.fromWeb(response.body as ReadableStream<Uint8Array>);
  let checked: Awaited<ReturnType<typeof readBackupFile>> | undefined;
  try {
    await writeAtomically(target, async (out) => {
      await pipeline(body, out);
      checked = await readBackupFile(partialName(target));
    });
  } catch (error) {
    // The file system's own error (it carries a path; a cut connection's does not) names the hidden
    // partial file: say which file could not be written.
    const { code, path: failedPath } = error as NodeJS.ErrnoException;
    if (!code || failedPath === undefined) throw error;
    // A file that appeared under the name while the backup downloaded is kept, as one there before.
    if (code === 'EEXIST') throw exists(target);
    throw new Error(
      `cannot write ${target} (${code}): check that its directory is writable and has room; nothing was written`,
    );
  }
  const { manifest, trailer } = checked as NonNullable<typeof checked>;
  return {
    backup: {
      file: target,
      created_at: manifest.created_at,
      berth_version: manifest.berth_version,
      migration: manifest.migration,
      rows: Object.values(trailer.tables).reduce((a, b) => a + b, 0),
      sha256: trailer.sha256,
      bytes: fs.statSync(target).size,
    },
  };
}

/**
 * `berth admin restore <file>`: onto the empty database BERTH_DATABASE_URL or BERTH_DATA_DIR names,
 * opened here (no server runs on it yet), with BERTH_MASTER_KEY's keys.
 */
export async function restoreFromFile(file: string) {
  // Loaded only here: the restore opens the database and knows every driver's migrations.
  const { restoreBackup } = await import('../restore.ts');
  return { restored: await restoreBackup(loadConfig(), path.resolve(file)) };
}

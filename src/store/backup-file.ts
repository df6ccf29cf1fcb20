import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import readline from 'node:readline';
import stream, { Readable, type Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import zlib from 'node:zlib';

/**
 * A Berth backup file (docs/operations.md, "Backups"): gzip of JSON lines. The first line is the
 * manifest, the last the trailer holding the SHA-256 of every line before it; in between, each table's
 * header (its columns and row count) followed by its rows, then the sequences.
 */
export const BACKUP_FORMAT = 1;

export interface BackupManifest {
  berth_backup: typeof BACKUP_FORMAT;
  berth_version: string;
  /** The database it was taken from; a backup restores onto either kind. */
  database: 'embedded' | 'postgres';
  created_at: string;
  /** The migration level: the last of Berth's migrations the database had run. */
  migration: string;
  /** Every migration run, per history: `berth` (Berth's own) and each provider driver's. */
  migrations: Record<string, string[]>;
  /** The master keys the sealed values in it are sealed with (ids, never keys). */
  master_key_ids: string[];
}

export interface BackupTrailer {
  sha256: string;
  tables: Record<string, number>;
}

/** A backup that cannot be used, or a restore that must not go on: the message says why. */
export class BackupError extends Error {}

/** The name a backup is written under until it is complete. */
export const partialName = (file: string) => path.join(path.dirname(file), `.${path.basename(file)}.partial`);

/** Lines with the trailer appended: the SHA-256 of every line before it. */
export async function* withTrailer(
  lines: AsyncIterable<string>,
  tables: Record<string, number>,
): AsyncGenerator<string> {
  const hash = createHash('sha256');
  for await (const line of lines) {
    hash.update(line);
    yield line;
  }
  yield `${JSON.stringify({ sha256: hash.digest('hex'), tables } satisfies BackupTrailer)}\n`;
}

/** Errors of a file system that keeps no hard links (vfat, some network and FUSE mounts). */
const NO_LINKS = new Set(['EPERM', 'ENOTSUP', 'EOPNOTSUPP', 'ENOSYS', 'EMLINK']);

/**
 * Gives the finished `partial` its final name. A link, not a rename: it refuses (EEXIST) a file that
 * appeared under the name meanwhile instead of replacing it. Where the file system has no links, a
 * rename after a look: the same refusal, but for a file made in the instant between the two.
 */
export async function publish(
  partial: string,
  file: string,
  link: (from: string, to: string) => Promise<void> = fs.promises.link,
): Promise<void> {
  try {
    await link(partial, file);
  } catch (error) {
    if (!NO_LINKS.has((error as NodeJS.ErrnoException).code ?? '')) throw error;
    if (fs.existsSync(file)) {
      throw Object.assign(new Error(`EEXIST: file already exists, link '${partial}' -> '${file}'`), {
        code: 'EEXIST',
      });
    }
    await fs.promises.rename(partial, file);
    return;
  }
  await fs.promises.unlink(partial);
}

/**
 * Writes a backup so that a crash at any moment leaves no file named as complete: into a hidden
 * `.partial` file (mode 0600: it holds sealed secrets and token hashes), flushed to disk, then linked
 * under its final name. A file already there is never replaced (EEXIST). A failure removes the partial
 * file and leaves every other file alone.
 */
export async function writeAtomically(file: string, write: (out: Writable) => Promise<void>): Promise<void> {
  const partial = partialName(file);
  const out = fs.createWriteStream(partial, { flags: 'w', mode: 0o600 });
  try {
    await write(out);
    const fd = await fs.promises.open(partial, 'r+');
    try {
      await fd.sync();
    } finally {
      await fd.close();
    }
    await publish(partial, file);
    // The link itself reaches the disk with the directory.
    const dir = await fs.promises.open(path.dirname(file), 'r');
    try {
      await dir.sync();
    } finally {
      await dir.close();
    }
  } catch (error) {
    out.destroy();
    await fs.promises.rm(partial, { force: true });
    throw error;
  }
}

/** Writes `lines` (trailer included) as a backup file. */
export function writeBackupFile(file: string, lines: AsyncIterable<string>): Promise<void> {
  return writeAtomically(file, (out) => pipeline(Readable.from(lines), zlib.createGzip(), out));
}

/** The lines of a backup file, without their newlines. */
async function* linesOf(file: string): AsyncGenerator<string> {
  // pipeline, not pipe: the file's own errors (none there, a directory) reach the lines read below.
  const input = stream.pipeline(fs.createReadStream(file), zlib.createGunzip(), () => {});
  try {
    yield* readline.createInterface({ input, crlfDelay: Number.POSITIVE_INFINITY });
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') throw new BackupError(`${file}: no such file`);
    if (code === 'EISDIR') throw new BackupError(`${file} is a directory: name a backup file in it`);
    if (code?.startsWith('Z_'))
      throw new BackupError(`${file} is not a Berth backup (not gzip, or cut short)`);
    throw error;
  } finally {
    input.destroy();
  }
}

function parse<T>(file: string, line: string, what: string): T {
  try {
    return JSON.parse(line) as T;
  } catch {
    throw new BackupError(`${file} is not a Berth backup (its ${what} is not JSON)`);
  }
}

/** The first line as a manifest: JSON of an object naming its format, else the file is no backup. */
function manifestOf(file: string, line: string): BackupManifest {
  const manifest = parse<BackupManifest | null>(file, line, 'first line');
  if (typeof manifest !== 'object' || manifest === null || !('berth_backup' in manifest)) {
    throw new BackupError(`${file} is not a Berth backup (its first line is no Berth backup manifest)`);
  }
  return manifest;
}

/**
 * Reads a backup through, checking it: a manifest first, a trailer last, and the SHA-256 the trailer
 * names matching the lines before it. `onLine` sees every line between them, in order; it runs before
 * the checksum is known, so a caller writing them does so in a transaction it rolls back when this
 * throws.
 */
export async function readBackupFile(
  file: string,
  onLine: (line: string) => Promise<void> | void = () => {},
): Promise<{ manifest: BackupManifest; trailer: BackupTrailer }> {
  const hash = createHash('sha256');
  let manifest: BackupManifest | undefined;
  let pending: string | undefined;
  for await (const line of linesOf(file)) {
    if (pending !== undefined) {
      hash.update(`${pending}\n`);
      if (manifest === undefined) {
        manifest = manifestOf(file, pending);
        if (manifest.berth_backup !== BACKUP_FORMAT) {
          throw new BackupError(
            `${file} is not a Berth backup this version reads (format ${String(manifest.berth_backup)}, this Berth reads ${BACKUP_FORMAT})`,
          );
        }
      } else {
        await onLine(pending);
      }
    }
    pending = line;
  }
  if (manifest === undefined || pending === undefined) {
    // One line: a file of another kind, or a backup cut after its manifest.
    if (pending !== undefined) manifestOf(file, pending);
    throw new BackupError(`${file} is not a complete Berth backup: it ends before its trailer`);
  }
  const trailer = parse<BackupTrailer | null>(file, pending, 'trailer');
  const actual = hash.digest('hex');
  if (typeof trailer?.sha256 !== 'string') {
    throw new BackupError(`${file} is not a complete Berth backup: it ends before its trailer`);
  }
  if (trailer.sha256 !== actual) {
    throw new BackupError(
      `${file} does not match its checksum (the trailer says sha256 ${trailer.sha256}, the content hashes to ${actual}): ` +
        'the file is damaged or was changed; restore another backup',
    );
  }
  return { manifest, trailer };
}

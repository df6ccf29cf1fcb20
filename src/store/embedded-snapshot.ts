/**
 * A new embedded data directory starts from a prepared one. PGlite's own first start runs initdb in
 * WebAssembly (in a second PGlite instance) and then every migration: about 10 s of CPU and twice the
 * memory. Loading a data directory that already went through both (PGlite's `loadDataDir`) takes a
 * fraction of that; the migrations added since the snapshot was made still run as usual.
 * `npm run generate:snapshot` (tools/embedded-snapshot/generate.ts) remakes it.
 *
 * Berth writes the snapshot's files itself (`prepareSnapshot`, `installSnapshot`) rather than through
 * PGlite's `loadDataDir`, which writes each of its ~600 files (27 MB) through the WebAssembly file system,
 * synchronously: `berth serve` starts writing them, off the main thread, before it loads its modules, and
 * moves the finished directory into place once it holds the data directory's lock (docs/performance.md,
 * "An idle embedded server, and its start").
 */
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import zlib from 'node:zlib';
import type { PGlite } from '@electric-sql/pglite';

export const SNAPSHOT_FILE = fileURLToPath(new URL('./embedded-snapshot/pgdata.tgz', import.meta.url));
export const SNAPSHOT_META_FILE = fileURLToPath(new URL('./embedded-snapshot/meta.json', import.meta.url));

export interface SnapshotMeta {
  /** The PGlite that made it: another PGlite's Postgres may not read its catalog. */
  pglite: string;
  /** The migrations already applied in it. */
  migrations: string[];
}

/**
 * PGlite's start parameters: its defaults with 16 MB of shared buffers instead of 128 MB, which it
 * would otherwise touch at start (RSS) for a database a control plane keeps in a few megabytes.
 */
export function embeddedStartParams(pglite: Pick<typeof PGlite, 'defaultStartParams'>): string[] {
  return [...pglite.defaultStartParams, '-c', 'shared_buffers=16MB'];
}

/** The installed PGlite's version (its package exports no package.json). */
export function installedPgliteVersion(): string {
  const entry = fileURLToPath(import.meta.resolve('@electric-sql/pglite'));
  const manifest = path.join(path.dirname(entry), '..', 'package.json');
  return (JSON.parse(fs.readFileSync(manifest, 'utf8')) as { version: string }).version;
}

export function readSnapshotMeta(): SnapshotMeta | undefined {
  try {
    return JSON.parse(fs.readFileSync(SNAPSHOT_META_FILE, 'utf8')) as SnapshotMeta;
  } catch {
    return undefined;
  }
}

/**
 * The snapshot to load into `pgdata`, or undefined when PGlite should find or create the database
 * itself: `pgdata` already holds one, or no snapshot made by the installed PGlite is there.
 */
export function snapshotFor(pgdata: string): Blob | undefined {
  if (fs.existsSync(path.join(pgdata, 'PG_VERSION'))) return undefined;
  if (readSnapshotMeta()?.pglite !== installedPgliteVersion()) return undefined;
  return new Blob([fs.readFileSync(SNAPSHOT_FILE)]);
}

/** Snapshots being written beside `pgdata`, by its path: started early, moved into place under the lock. */
const preparing = new Map<string, Promise<string | undefined>>();
const LOADING = '.loading-';

/**
 * Starts writing the snapshot into a directory of its own beside `pgdata` (no lock needed: nobody else
 * knows it), unless `pgdata` holds a database or no snapshot fits; resolves to that directory, or
 * undefined (then PGlite loads or creates the database as before). Never rejects.
 */
export function prepareSnapshot(pgdata: string): Promise<string | undefined> {
  let pending = preparing.get(pgdata);
  if (!pending) {
    pending = writeSnapshot(pgdata).catch(() => undefined);
    preparing.set(pgdata, pending);
  }
  return pending;
}

async function writeSnapshot(pgdata: string): Promise<string | undefined> {
  if (fs.existsSync(path.join(pgdata, 'PG_VERSION'))) return undefined;
  if (readSnapshotMeta()?.pglite !== installedPgliteVersion()) return undefined;
  // The data directory as the lock makes it (data-dir-lock.ts): only its owner may read it.
  fs.mkdirSync(path.dirname(pgdata), { recursive: true, mode: 0o700 });
  const target = `${pgdata}${LOADING}${process.pid}-${randomBytes(4).toString('hex')}`;
  try {
    const tar = await promisify(zlib.gunzip)(await fs.promises.readFile(SNAPSHOT_FILE));
    const writes: Promise<void>[] = [];
    const made = new Set<string>();
    const mkdir = (dir: string) => {
      if (made.has(dir)) return;
      fs.mkdirSync(dir, { recursive: true });
      made.add(dir);
    };
    mkdir(target);
    // ustar, as PGlite writes it (dumpDataDir): a 512-byte header per entry, its data padded to 512.
    for (let at = 0; at + 512 <= tar.length; ) {
      const header = tar.subarray(at, at + 512);
      if (header[0] === 0) break;
      const text = (from: number, length: number) => {
        const field = header.subarray(from, from + length);
        const end = field.indexOf(0);
        return field.subarray(0, end < 0 ? length : end).toString('utf8');
      };
      const prefix = text(345, 155);
      const name = prefix ? `${prefix}/${text(0, 100)}` : text(0, 100);
      const size = Number.parseInt(text(124, 12).trim() || '0', 8);
      const type = header[156];
      const file = path.join(target, name);
      if (!file.startsWith(`${target}${path.sep}`)) throw new Error(`the snapshot names ${name}`);
      at += 512;
      // '5' a directory; '0' (or NUL, the old format) a file. PGlite writes no other kind.
      if (type === 0x35) mkdir(file);
      else if (type === 0x30 || type === 0) {
        mkdir(path.dirname(file));
        writes.push(fs.promises.writeFile(file, tar.subarray(at, at + size)));
      }
      at += Math.ceil(size / 512) * 512;
    }
    await Promise.all(writes);
    return target;
  } catch (error) {
    fs.rmSync(target, { recursive: true, force: true });
    throw error;
  }
}

/**
 * Under the data directory's lock: moves the snapshot `prepareSnapshot` wrote (writing it now if nothing
 * started it) into `pgdata`; false when `pgdata` is left as it was (a database there, no snapshot fits, or
 * files of a start that stopped early: PGlite's `loadDataDir` then loads over them, as it always did).
 * Leftovers of starts that died while writing are removed.
 */
export async function installSnapshot(pgdata: string): Promise<boolean> {
  const prepared = await prepareSnapshot(pgdata);
  preparing.delete(pgdata);
  removeLeftovers(pgdata, prepared);
  if (!prepared) return false;
  try {
    if (fs.existsSync(path.join(pgdata, 'PG_VERSION'))) throw new Error('a database is there');
    // An empty pgdata goes (rename replaces none but an empty directory anyway); one with files stays.
    try {
      fs.rmdirSync(pgdata);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    }
    fs.renameSync(prepared, pgdata);
    return true;
  } catch {
    fs.rmSync(prepared, { recursive: true, force: true });
    return false;
  }
}

/** `pgdata.loading-<pid>-*` directories of processes that are gone (a start killed while writing). */
function removeLeftovers(pgdata: string, keep: string | undefined): void {
  const dir = path.dirname(pgdata);
  const stem = `${path.basename(pgdata)}${LOADING}`;
  let names: string[];
  try {
    names = fs.readdirSync(dir);
  } catch {
    return;
  }
  for (const name of names) {
    if (!name.startsWith(stem) || path.join(dir, name) === keep) continue;
    const pid = Number(name.slice(stem.length).split('-')[0]);
    if (pid === process.pid || alive(pid)) continue;
    fs.rmSync(path.join(dir, name), { recursive: true, force: true });
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

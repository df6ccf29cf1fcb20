/**
 * A new embedded data directory starts from a prepared one. PGlite's own first start runs initdb in
 * WebAssembly (in a second PGlite instance) and then every migration: about 10 s of CPU and twice the
 * memory. Loading a data directory that already went through both (PGlite's `loadDataDir`) takes a
 * fraction of that; the migrations added since the snapshot was made still run as usual.
 * `npm run generate:snapshot` (tools/embedded-snapshot/generate.ts) remakes it.
 */
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
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

import path from 'node:path';
import v8 from 'node:v8';
import { Kysely, type KyselyConfig, PostgresDialect } from 'kysely';
import { watchingCommits } from './committed-writes.ts';
import { lockDataDir } from './data-dir-lock.ts';
import { embeddedStartParams, snapshotFor } from './embedded-snapshot.ts';
import { recordingEvents } from './events.ts';
import { MigrationError, migrateToLatest } from './migrate.ts';
import { embeddedSource, Notifications, postgresSource } from './notifications.ts';
import { preparedPGliteDialect } from './pglite-prepared.ts';
import type { Database } from './schema.ts';

export type Db = Kysely<Database>;

/** A Postgres store's connections when its opener names no number. */
export const DEFAULT_POOL_SIZE = 10;

export interface Store {
  db: Db;
  /** `embedded` is PGlite: one connection, one process, the data directory locked. */
  kind: 'embedded' | 'postgres';
  /** Every notification of the process: changes, jobs, events, logs, access (notifications.ts). */
  notifications: Notifications;
  close(): Promise<void>;
}

export interface OpenStoreOptions {
  databaseUrl: string | undefined;
  dataDir: string;
  migrate?: boolean;
  /** Sees every query Kysely runs (tests count queries per request with it). */
  onQuery?: (sql: string) => void;
  /** Sees how long each statement took, and whether it failed (the metrics' statement latency). */
  onStatement?: (ms: number, ok: boolean) => void;
  /** Postgres: connections in this store's pool (DEFAULT_POOL_SIZE unless said). */
  poolSize?: number;
  /** A pooled Postgres connection failed while idle (a server restart, say); the pool replaces it. */
  onConnectionError?: (error: Error) => void;
  /**
   * Postgres: share another store's notifications (one LISTEN connection per process). This store's
   * commits then reach them as notifications, like another process's.
   */
  notifications?: Notifications;
  /**
   * Embedded: a new data directory is made by PGlite's initdb rather than loaded from the snapshot,
   * whose schema is already migrated (a restore of a backup older than the snapshot needs an empty one).
   */
  initdb?: boolean;
}

async function openEmbedded(
  dataDir: string,
  log: KyselyConfig['log'],
  initdb: boolean,
): Promise<Omit<Store, 'close'> & { close(): Promise<void> }> {
  // The lock comes first: a second process must not open a single database file.
  const lock = await lockDataDir(dataDir);
  try {
    const pgdata = path.join(dataDir, 'pgdata');
    // PGlite's Postgres stays on V8's baseline WebAssembly code: tiering up to the optimizing compiler
    // took ~600 MB of scratch memory at start, which the C allocator then kept (idle RSS +60 MB), and
    // made Berth's statements no faster (docs/performance.md, "Memory"). Both flags are needed.
    v8.setFlagsFromString('--no-wasm-tier-up');
    v8.setFlagsFromString('--no-wasm-dynamic-tiering');
    // Loaded only here: a server on Postgres never needs PGlite's half a megabyte of JavaScript.
    const pgliteModule = await import('@electric-sql/pglite');
    const { PGlite } = pgliteModule;
    const pglite = await PGlite.create(pgdata, {
      loadDataDir: initdb ? undefined : snapshotFor(pgdata),
      startParams: embeddedStartParams(PGlite),
    });
    // Unlistening runs a statement: once the database is closed there is nothing left to unlisten.
    const listen = async (channel: string, onNotify: (payload: string) => void) => {
      const unlisten = await pglite.listen(channel, onNotify);
      return async () => {
        if (!pglite.closed) await unlisten();
      };
    };
    const notifications = new Notifications(embeddedSource(listen));
    const dialect = recordingEvents(
      watchingCommits(preparedPGliteDialect(pglite, pgliteModule), () => notifications.committedHere()),
    );
    const db = new Kysely<Database>({ dialect, log });
    return {
      db,
      kind: 'embedded',
      notifications,
      close: async () => {
        await notifications.close();
        await db.destroy();
        await lock.release();
      },
    };
  } catch (error) {
    await lock.release();
    throw error;
  }
}

async function openPostgres(
  databaseUrl: string,
  log: KyselyConfig['log'],
  onConnectionError: (error: Error) => void,
  poolSize: number,
  shared: Notifications | undefined,
): Promise<Store> {
  // Loaded only here: node-postgres (~10 MB) is nothing an embedded server needs.
  const [{ default: pg }, { PreparingClient }] = await Promise.all([import('pg'), import('./prepared.ts')]);
  const pool = new pg.Pool({ connectionString: databaseUrl, max: poolSize, Client: PreparingClient });
  // Without a listener an idle connection's error would end the process.
  pool.on('error', onConnectionError);
  const notifications = shared ?? new Notifications(postgresSource(databaseUrl, onConnectionError));
  const dialect = recordingEvents(
    shared
      ? new PostgresDialect({ pool })
      : watchingCommits(new PostgresDialect({ pool }), () => notifications.committedHere()),
  );
  const db = new Kysely<Database>({ dialect, log });
  return {
    db,
    kind: 'postgres',
    notifications,
    close: async () => {
      if (!shared) await notifications.close();
      await db.destroy();
    },
  };
}

/** Where a database URL points, its password left out: `user@host:port/database`. */
function whereOf(databaseUrl: string): string {
  const url = new URL(databaseUrl);
  return `${url.username ? `${decodeURIComponent(url.username)}@` : ''}${url.host}${url.pathname}`;
}

export async function openStore(options: OpenStoreOptions): Promise<Store> {
  const { onQuery, onStatement } = options;
  const log: KyselyConfig['log'] =
    onQuery || onStatement
      ? (event) => {
          onQuery?.(event.query.sql);
          onStatement?.(event.queryDurationMillis, event.level === 'query');
        }
      : undefined;
  const store = options.databaseUrl
    ? await openPostgres(
        options.databaseUrl,
        log,
        options.onConnectionError ?? (() => undefined),
        options.poolSize ?? DEFAULT_POOL_SIZE,
        options.notifications,
      )
    : await openEmbedded(options.dataDir, log, options.initdb === true);
  if (options.migrate !== false) {
    try {
      await migrateToLatest(store.db);
    } catch (error) {
      await store.close();
      if (options.databaseUrl && error instanceof MigrationError && error.migration === undefined) {
        throw new MigrationError(
          `cannot use the database of BERTH_DATABASE_URL (${whereOf(options.databaseUrl)}): ${(error.cause as Error | undefined)?.message ?? error.message}`,
        );
      }
      throw error;
    }
  }
  return store;
}

/** PostgreSQL's unique_violation (23505), from node-postgres and PGlite alike. */
export function isUniqueViolation(error: unknown): boolean {
  return (error as { code?: string } | null)?.code === '23505';
}

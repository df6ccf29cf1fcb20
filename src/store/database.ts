import path from 'node:path';
import { PGlite } from '@electric-sql/pglite';
import { Kysely, type KyselyConfig, PGliteDialect, PostgresDialect } from 'kysely';
import pg from 'pg';
import { CHANGES_CHANNEL, ChangeFeed, postgresChangeSource, watchingCommits } from './changes.ts';
import { lockDataDir } from './data-dir-lock.ts';
import { EMBEDDED_START_PARAMS, snapshotFor } from './embedded-snapshot.ts';
import { migrateToLatest } from './migrate.ts';
import type { Database } from './schema.ts';

export type Db = Kysely<Database>;

export interface Store {
  db: Db;
  /** `embedded` is PGlite: one connection, one process, the data directory locked. */
  kind: 'embedded' | 'postgres';
  /** Committed changes to what clients poll, for read caches (changes.ts). */
  changes: ChangeFeed;
  /** Calls `onNotify` for each NOTIFY on `channel` (delivered when the notifying transaction commits). */
  listen(channel: string, onNotify: (payload: string) => void): Promise<() => Promise<void>>;
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
  /** Postgres: connections in this store's pool (default 10). */
  poolSize?: number;
  /** A pooled Postgres connection failed while idle (a server restart, say); the pool replaces it. */
  onConnectionError?: (error: Error) => void;
}

async function openEmbedded(
  dataDir: string,
  log: KyselyConfig['log'],
): Promise<Omit<Store, 'close'> & { close(): Promise<void> }> {
  // The lock comes first: a second process must not open a single database file.
  const lock = await lockDataDir(dataDir);
  try {
    const pgdata = path.join(dataDir, 'pgdata');
    const pglite = await PGlite.create(pgdata, {
      loadDataDir: snapshotFor(pgdata),
      startParams: EMBEDDED_START_PARAMS,
    });
    // Unlistening runs a statement: once the database is closed there is nothing left to unlisten.
    const listen = async (channel: string, onNotify: (payload: string) => void) => {
      const unlisten = await pglite.listen(channel, onNotify);
      return async () => {
        if (!pglite.closed) await unlisten();
      };
    };
    // In process: PGlite hands each notification over as the committing statement returns.
    const changes = new ChangeFeed(async ({ notify, up }) => {
      const unlisten = await listen(CHANGES_CHANNEL, notify);
      up();
      return unlisten;
    });
    const dialect = watchingCommits(new PGliteDialect({ pglite }), () => changes.committedHere());
    const db = new Kysely<Database>({ dialect, log });
    return {
      db,
      kind: 'embedded',
      changes,
      listen,
      close: async () => {
        await db.destroy();
        await lock.release();
      },
    };
  } catch (error) {
    await lock.release();
    throw error;
  }
}

function openPostgres(
  databaseUrl: string,
  log: KyselyConfig['log'],
  onConnectionError: (error: Error) => void,
  poolSize: number,
): Store {
  const pool = new pg.Pool({ connectionString: databaseUrl, max: poolSize });
  // Without a listener an idle connection's error would end the process.
  pool.on('error', onConnectionError);
  const changes = new ChangeFeed(postgresChangeSource(databaseUrl, onConnectionError));
  const dialect = watchingCommits(new PostgresDialect({ pool }), () => changes.committedHere());
  const db = new Kysely<Database>({ dialect, log });
  const listeners = new Set<pg.Client>();
  return {
    db,
    kind: 'postgres',
    changes,
    listen: async (channel, onNotify) => {
      // LISTEN needs a connection of its own, outside the pool.
      const client = new pg.Client({ connectionString: databaseUrl });
      // A lost LISTEN connection costs only promptness: workers fall back to polling.
      client.on('error', onConnectionError);
      await client.connect();
      client.on('notification', (message) => message.channel === channel && onNotify(message.payload ?? ''));
      await client.query(`LISTEN ${client.escapeIdentifier(channel)}`);
      listeners.add(client);
      return async () => {
        listeners.delete(client);
        await client.end().catch(() => undefined);
      };
    },
    close: async () => {
      await Promise.all([...listeners].map((c) => c.end().catch(() => undefined)));
      await db.destroy();
    },
  };
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
    ? openPostgres(
        options.databaseUrl,
        log,
        options.onConnectionError ?? (() => undefined),
        options.poolSize ?? 10,
      )
    : await openEmbedded(options.dataDir, log);
  if (options.migrate !== false) {
    try {
      await migrateToLatest(store.db);
    } catch (error) {
      await store.close();
      throw error;
    }
  }
  return store;
}

/** PostgreSQL's unique_violation (23505), from node-postgres and PGlite alike. */
export function isUniqueViolation(error: unknown): boolean {
  return (error as { code?: string } | null)?.code === '23505';
}

/**
 * Change notifications: what tells a process's read cache that what it holds is no longer current.
 *
 * - Committed changes from any process: the triggers of migration 0013 NOTIFY `berth_changes` with
 *   tags (`deployment:<id> service:<id>`). On Postgres a connection of its own LISTENs (reconnecting
 *   when it is lost); on the embedded database PGlite hands them over in process.
 * - Commits of this process: seen directly, when they return (`watchingCommits`), since a Postgres
 *   notification can reach this process's listener after the writer's own next read.
 * - Whether changes can be seen at all: while the listening connection is down a change could go
 *   unnoticed, so subscribers hear `down` (drop what they hold) and `up` once it is back.
 * @module
 */
import type {
  AbortableOperationOptions,
  CompiledQuery,
  DatabaseConnection,
  Dialect,
  Driver,
  QueryResult,
} from 'kysely';
import pg from 'pg';

export const CHANGES_CHANNEL = 'berth_changes';

export interface ChangeListener {
  /** A change named by these tags committed (in this process or another). */
  changed(tags: string[]): void;
  /** This process committed a change to a watched table; its tags follow with the notification. */
  committedHere(): void;
  /** Changes can go unseen from now on: nothing held may be trusted. */
  down(): void;
  /** Changes are seen again, from now on. */
  up(): void;
}

/** Where notifications come from: calls `notify` for each payload, `up` / `down` as its connection goes. */
export type ChangeSource = (events: {
  notify(payload: string): void;
  up(): void;
  down(): void;
}) => Promise<() => Promise<void>>;

export class ChangeFeed {
  private readonly listeners = new Set<ChangeListener>();
  private readonly source: ChangeSource;
  private stopSource: Promise<() => Promise<void>> | undefined;
  private live = false;

  constructor(source: ChangeSource) {
    this.source = source;
  }

  /** True while a change committed anywhere is sure to be announced. */
  get isLive(): boolean {
    return this.live;
  }

  /** The first subscriber starts listening; the last one to leave stops it. */
  subscribe(listener: ChangeListener): () => Promise<void> {
    this.listeners.add(listener);
    if (this.live) listener.up();
    this.stopSource ??= this.source({
      notify: (payload) => {
        const tags = payload.split(' ');
        for (const l of this.listeners) l.changed(tags);
      },
      up: () => {
        this.live = true;
        for (const l of this.listeners) l.up();
      },
      down: () => {
        this.live = false;
        for (const l of this.listeners) l.down();
      },
    });
    return async () => {
      this.listeners.delete(listener);
      if (this.listeners.size > 0 || !this.stopSource) return;
      const stopping = this.stopSource;
      this.stopSource = undefined;
      this.live = false;
      await (await stopping)();
    };
  }

  committedHere(): void {
    for (const l of this.listeners) l.committedHere();
  }
}

/**
 * LISTEN on a connection of its own, outside the pool. A lost connection is `down` at once and is
 * replaced (0.1 s, doubling up to 5 s between attempts); it is `up` again once LISTEN has run.
 */
export function postgresChangeSource(
  databaseUrl: string,
  onConnectionError: (error: Error) => void,
): ChangeSource {
  return async ({ notify, up, down }) => {
    let stopped = false;
    let stopRequested: () => void = () => undefined;
    const stopping = new Promise<void>((resolve) => {
      stopRequested = resolve;
    });
    let wake: (() => void) | undefined;
    const pause = (ms: number) =>
      new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, ms);
        wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
    const run = async () => {
      let backoffMs = 100;
      while (!stopped) {
        const current = new pg.Client({ connectionString: databaseUrl });
        const lost = new Promise<void>((resolve) => {
          current.on('error', (error) => {
            onConnectionError(error);
            resolve();
          });
          current.on('end', () => resolve());
        });
        current.on('notification', (message) => {
          if (message.channel === CHANGES_CHANNEL) notify(message.payload ?? '');
        });
        // A connection ended while it is still being made may never settle its connect(): a stop does
        // not wait on it (a server that stopped at once would otherwise hang on its way out).
        const listening = current.connect().then(() => current.query(`LISTEN ${CHANGES_CHANNEL}`));
        listening.catch(() => undefined);
        try {
          await Promise.race([listening, stopping]);
          if (!stopped) {
            backoffMs = 100;
            up();
            await Promise.race([lost, stopping]);
          }
        } catch (error) {
          onConnectionError(error as Error);
        }
        down();
        const ended = current.end().catch(() => undefined);
        if (stopped) break;
        await ended;
        await pause(backoffMs);
        backoffMs = Math.min(5000, backoffMs * 2);
      }
    };
    const running = run();
    return async () => {
      stopped = true;
      stopRequested();
      wake?.();
      await running;
    };
  };
}

/**
 * Tables whose rows the triggers announce; a write to one is a change this process made. Anywhere in
 * the statement: a data-modifying WITH writes too.
 */
const WATCHED_WRITE =
  /\b(?:insert into|update|delete from) "(?:deployments|services|custom_domains|service_observations|environments)"/;

/**
 * The dialect, telling `committed` when a write to a watched table is durable: when a statement
 * outside a transaction returns, or when the transaction that made it commits.
 */
export function watchingCommits(dialect: Dialect, committed: () => void): Dialect {
  return {
    createAdapter: () => dialect.createAdapter(),
    createQueryCompiler: () => dialect.createQueryCompiler(),
    createIntrospector: (db) => dialect.createIntrospector(db),
    createDriver: () => commitWatchingDriver(dialect.createDriver(), committed),
  };
}

function commitWatchingDriver(inner: Driver, committed: () => void): Driver {
  const inTransaction = new WeakSet<DatabaseConnection>();
  const wrote = new WeakSet<DatabaseConnection>();
  // One watcher per connection, kept: drivers hand out the same connection again, and Kysely wraps
  // a connection's executeQuery (its query log) by assigning it, once.
  const watchers = new WeakMap<DatabaseConnection, DatabaseConnection>();
  const watch = (connection: DatabaseConnection): DatabaseConnection => {
    const known = watchers.get(connection);
    if (known) return known;
    const execute = connection.executeQuery.bind(connection);
    let assigned: DatabaseConnection['executeQuery'] | undefined;
    const own: DatabaseConnection['executeQuery'] = async <R>(
      query: CompiledQuery,
      options?: AbortableOperationOptions,
    ): Promise<QueryResult<R>> => {
      const result = await execute<R>(query, options);
      if (WATCHED_WRITE.test(query.sql)) {
        if (inTransaction.has(watched)) wrote.add(watched);
        else committed();
      }
      return result;
    };
    const watched: DatabaseConnection = new Proxy(connection, {
      get(target, property) {
        if (property === 'executeQuery') return assigned ?? own;
        // The driver's own methods (some keyed by private symbols) run on the real connection.
        const value = Reflect.get(target, property, target);
        return typeof value === 'function' ? value.bind(target) : value;
      },
      set(target, property, value) {
        if (property === 'executeQuery') assigned = value;
        else Reflect.set(target, property, value, target);
        return true;
      },
    });
    watchers.set(connection, watched);
    return watched;
  };
  const ended = (connection: DatabaseConnection) => {
    inTransaction.delete(connection);
    wrote.delete(connection);
  };
  return {
    init: (options) => inner.init(options),
    acquireConnection: async (options) => watch(await inner.acquireConnection(options)),
    beginTransaction: async (connection, settings) => {
      await inner.beginTransaction(connection, settings);
      inTransaction.add(connection);
    },
    commitTransaction: async (connection) => {
      const changed = wrote.has(connection);
      ended(connection);
      await inner.commitTransaction(connection);
      if (changed) committed();
    },
    rollbackTransaction: async (connection) => {
      ended(connection);
      await inner.rollbackTransaction(connection);
    },
    ...(inner.savepoint && { savepoint: inner.savepoint.bind(inner) }),
    ...(inner.rollbackToSavepoint && { rollbackToSavepoint: inner.rollbackToSavepoint.bind(inner) }),
    ...(inner.releaseSavepoint && { releaseSavepoint: inner.releaseSavepoint.bind(inner) }),
    releaseConnection: (connection, options) => inner.releaseConnection(connection, options),
    destroy: (options) => inner.destroy(options),
  };
}

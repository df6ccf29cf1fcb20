/**
 * Writes this process commits to the tables whose changes `changes` notifications announce (migration
 * 0013's triggers): seen directly, when they return, since a Postgres notification can reach this
 * process's listener after the writer's own next read (notifications.ts `committedHere`).
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

/**
 * Tables whose rows the triggers announce; a write to one is a change this process made. Anywhere in
 * the statement: a data-modifying WITH writes too.
 */
const WATCHED_WRITE =
  /\b(?:insert into|update|delete from) "(?:deployments|services|custom_domains|service_observations|environments)"/;

/**
 * WATCHED_WRITE's verdict per statement text, kept: the texts are few (the prepared-statement clients
 * keep as many), and testing the long ones again on every run was a share of each statement's CPU.
 */
const watchedTexts = new Map<string, boolean>();
const MAX_WATCHED_TEXTS = 1000;

function writesWatched(text: string): boolean {
  let watched = watchedTexts.get(text);
  if (watched === undefined) {
    watched = WATCHED_WRITE.test(text);
    if (watchedTexts.size < MAX_WATCHED_TEXTS) watchedTexts.set(text, watched);
  }
  return watched;
}

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
      if (writesWatched(query.sql)) {
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

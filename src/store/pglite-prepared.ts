/**
 * The embedded database's Kysely dialect: Kysely's PGlite dialect with each statement prepared once.
 * PGlite's `query()` makes six calls into its WebAssembly Postgres a statement (parse, describe,
 * bind, describe, execute, sync), and Postgres parses, analyzes and plans the text every time: that,
 * not the work the statement asks for, was most of a statement's 0.6-1 ms (docs/performance.md,
 * "Deployments"). Here a statement's text is parsed once, as a named prepared statement whose
 * parameter types and row description are kept; each run after is one call (bind, execute, sync)
 * that Postgres answers from its plan cache. Values are serialized and rows parsed by PGlite's own
 * serializers and parsers, as `query()` does, so results and errors are the same.
 *
 * Concurrency is PGlite's: Kysely runs one statement or transaction at a time on its one connection
 * (the adapter allows a single connection), a transaction holds PGlite's transaction lock (so a LISTEN
 * never lands inside it) and every call into PGlite holds its query lock.
 * @module
 */
import type { PGlite, Results, Transaction } from '@electric-sql/pglite';
import {
  type CompiledQuery,
  type DatabaseConnection,
  type Dialect,
  type Driver,
  PGliteDialect,
  type QueryResult,
  type TransactionSettings,
} from 'kysely';
import { isSchemaChange, LEAD } from './statement-text.ts';

type PGliteModule = typeof import('@electric-sql/pglite');
type Message = Awaited<ReturnType<PGlite['execProtocol']>>['messages'][number];

/** Prepared statements kept; past it the oldest is closed (a statement text made per call, say). */
const KEPT = 500;

/** Statements worth keeping; anything else (DDL, transaction control, LISTEN) runs as `query()` runs it. */
const PREPARABLE = new RegExp(`${LEAD}(?:select|insert|update|delete|with)\\b`, 'i');

interface Prepared {
  name: string;
  /** The parameters' types as Postgres inferred them, which pick PGlite's serializers. */
  types: number[];
  /** The row description (or none), put before each run's rows for PGlite's result parser. */
  described: Message[];
}

export function preparedPGliteDialect(pglite: PGlite, module: PGliteModule): Dialect {
  const inner = new PGliteDialect({ pglite });
  return {
    createAdapter: () => inner.createAdapter(),
    createQueryCompiler: () => inner.createQueryCompiler(),
    createIntrospector: (db) => inner.createIntrospector(db),
    createDriver: () => new PreparedDriver(pglite, module),
  };
}

class PreparedDriver implements Driver {
  readonly #connection: PreparedConnection;
  readonly #pglite: PGlite;

  constructor(pglite: PGlite, module: PGliteModule) {
    this.#pglite = pglite;
    this.#connection = new PreparedConnection(pglite, module);
  }

  async init(): Promise<void> {
    await this.#pglite.waitReady;
  }

  async acquireConnection(): Promise<DatabaseConnection> {
    return this.#connection;
  }

  async beginTransaction(connection: DatabaseConnection, _settings: TransactionSettings): Promise<void> {
    await (connection as PreparedConnection).begin();
  }

  async commitTransaction(connection: DatabaseConnection): Promise<void> {
    await (connection as PreparedConnection).end(true);
  }

  async rollbackTransaction(connection: DatabaseConnection): Promise<void> {
    await (connection as PreparedConnection).end(false);
  }

  async releaseConnection(): Promise<void> {}

  async destroy(): Promise<void> {
    if (!this.#pglite.closed) await this.#pglite.close();
  }
}

class PreparedConnection implements DatabaseConnection {
  readonly #pglite: PGlite;
  readonly #module: PGliteModule;
  readonly #kept = new Map<string, Prepared>();
  /** Close messages of statements no longer kept, sent with the next call. */
  #closing: Uint8Array[] = [];
  #made = 0;
  /** The open transaction: `end` settles `finish` and awaits `done` (its COMMIT or ROLLBACK). */
  #transaction: { tx: Transaction; finish: (commit: boolean) => void; done: Promise<void> } | undefined;

  constructor(pglite: PGlite, module: PGliteModule) {
    this.#pglite = pglite;
    this.#module = module;
  }

  async begin(): Promise<void> {
    let finish!: (commit: boolean) => void;
    const decided = new Promise<boolean>((resolve) => {
      finish = resolve;
    });
    let begun!: (tx: Transaction) => void;
    const started = new Promise<Transaction>((resolve) => {
      begun = resolve;
    });
    // PGlite's transaction(): BEGIN, its lock held until the callback ends, then COMMIT (or ROLLBACK
    // when the callback throws).
    const done = this.#pglite.transaction(async (tx) => {
      begun(tx);
      if (!(await decided)) throw ROLLBACK;
    });
    const tx = await Promise.race([started, done.then(() => undefined)]);
    if (tx) this.#transaction = { tx, finish, done };
  }

  async end(commit: boolean): Promise<void> {
    const transaction = this.#transaction;
    this.#transaction = undefined;
    if (!transaction) return;
    transaction.finish(commit);
    try {
      await transaction.done;
    } catch (error) {
      if (error !== ROLLBACK) throw error;
    }
  }

  async executeQuery<R>(compiled: CompiledQuery): Promise<QueryResult<R>> {
    const { sql } = compiled;
    const parameters = compiled.parameters as unknown[];
    if (!PREPARABLE.test(sql)) {
      // After a schema change a kept statement's row description may be stale: all are prepared again.
      if (isSchemaChange(sql)) this.#forgetAll();
      return toQueryResult(await (this.#transaction?.tx ?? this.#pglite).query<R>(sql, parameters));
    }
    const run = () => this.#pglite._runExclusiveQuery(() => this.#run<R>(sql, parameters));
    if (this.#transaction) return run();
    const result = await this.#pglite._runExclusiveTransaction(run);
    await this.#pglite.syncToFs();
    return result;
  }

  streamQuery(): AsyncIterableIterator<QueryResult<never>> {
    throw new Error('Streaming is not supported by PGlite.');
  }

  async #run<R>(sql: string, parameters: readonly unknown[]): Promise<QueryResult<R>> {
    const prepared = this.#kept.get(sql) ?? (await this.#prepare(sql, parameters));
    const { serialize } = this.#module.protocol;
    const values = parameters.map((value, i) => {
      if (value === null || value === undefined) return null;
      const serializer = this.#pglite.serializers[prepared.types[i] ?? 0];
      return serializer ? serializer(value) : String(value);
    });
    const messages = await this.#call(
      [serialize.bind({ statement: prepared.name, values }), serialize.execute({}), serialize.sync()],
      sql,
      parameters,
    );
    const [result] = this.#module.parse.parseResults(
      [...prepared.described, ...messages],
      this.#pglite.parsers,
      {
        rowMode: 'object',
      },
    );
    return toQueryResult(result as Results<R>);
  }

  async #prepare(sql: string, parameters: readonly unknown[]): Promise<Prepared> {
    const name = `berth_${++this.#made}`;
    const { serialize } = this.#module.protocol;
    const messages = await this.#call(
      [serialize.parse({ name, text: sql }), serialize.describe({ type: 'S', name }), serialize.sync()],
      sql,
      parameters,
    );
    const prepared: Prepared = {
      name,
      types: this.#module.parse.parseDescribeStatementResults(messages),
      described: messages.filter((m) => m.name === 'rowDescription' || m.name === 'noData'),
    };
    this.#kept.set(sql, prepared);
    if (this.#kept.size > KEPT) {
      const [oldest] = this.#kept;
      if (oldest) this.#forget(oldest[0], oldest[1]);
    }
    return prepared;
  }

  /** One call into PGlite with `parts` (after any pending closes); a statement's error is thrown. */
  async #call(parts: Uint8Array[], sql: string, parameters: readonly unknown[]): Promise<Message[]> {
    const all = this.#closing.length > 0 ? [...this.#closing, ...parts] : parts;
    this.#closing = [];
    const { messages } = await this.#pglite.execProtocol(concat(all), {
      syncToFs: false,
      throwOnError: false,
    });
    const error = messages.find((m) => m.name === 'error');
    if (error) {
      // A kept statement whose row type a schema change altered is prepared again next time.
      if ((error as { code?: string }).code === '0A000') {
        const prepared = this.#kept.get(sql);
        if (prepared) this.#forget(sql, prepared);
      }
      // As PGlite's query() leaves it: the statement and its parameters on the error.
      Object.assign(error, { query: sql, params: parameters });
      throw error;
    }
    return messages;
  }

  #forget(sql: string, prepared: Prepared): void {
    this.#kept.delete(sql);
    this.#closing.push(this.#module.protocol.serialize.close({ type: 'S', name: prepared.name }));
  }

  #forgetAll(): void {
    for (const [sql, prepared] of this.#kept) this.#forget(sql, prepared);
  }
}

/** What a rollback's callback throws so that PGlite's transaction() rolls back. */
const ROLLBACK = new Error('rollback');

function toQueryResult<R>(result: Results<R> | undefined): QueryResult<R> {
  return {
    numAffectedRows: result?.affectedRows != null ? BigInt(result.affectedRows) : undefined,
    rows: result?.rows ?? [],
  };
}

function concat(parts: Uint8Array[]): Uint8Array {
  let length = 0;
  for (const part of parts) length += part.length;
  const out = new Uint8Array(length);
  let at = 0;
  for (const part of parts) {
    out.set(part, at);
    at += part.length;
  }
  return out;
}

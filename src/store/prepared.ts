import { createHash } from 'node:crypto';
import pg from 'pg';
import { isSchemaChange } from './statement-text.ts';

/**
 * A node-postgres client that runs a statement the process has sent before as a named prepared
 * statement: the server parses it once per connection and, once a generic plan is as good as a
 * custom one, plans it once too. Unnamed, each statement was parsed and planned anew, which was most
 * of the database's CPU a deployment costs (docs/performance.md, "Deployments").
 *
 * A text is named on its second sight (a one-off never takes a connection's memory), and at most
 * MAX_NAMED texts are; beyond that, texts run unnamed as before. The bound is the server's memory: a
 * prepared statement with its plan holds about 110 KB in each connection's backend (28 statements
 * of a deployment's path took 3.2 MB), so 150 is at most ~16 MB a connection.
 *
 * A table that changes shape under a prepared `SELECT *` or `RETURNING *` makes the server refuse it
 * ("cached plan must not change result type"). Schema changes sent through this process (migrations,
 * restores) and a refusal (another process migrated) therefore start a new round: each connection drops
 * its prepared statements before its next one, and a refused statement outside a transaction is run
 * again unnamed. Inside a transaction the refusal is the transaction's error, once per connection.
 */
export const MAX_NAMED = 150;

const seen = new Map<string, string | null>();
let named = 0;
/** Bumped by a schema change or a refusal: connections of an older round drop their statements. */
let round = 0;

function hashFor(text: string): string | undefined {
  const hash = seen.get(text);
  if (hash) return hash;
  if (hash === undefined) {
    if (seen.size < MAX_NAMED * 4) seen.set(text, null);
    return undefined;
  }
  if (named >= MAX_NAMED) return undefined;
  named++;
  const hashed = `b${createHash('sha1').update(text).digest('base64url')}`;
  seen.set(text, hashed);
  return hashed;
}

function replanRefused(error: unknown): boolean {
  const e = error as { code?: string; message?: string } | null;
  return e?.code === '0A000' && /cached plan must not change result type/.test(e.message ?? '');
}

/**
 * What a statement's rows look like, as node-postgres's Result keeps it after a row description: the
 * fields, their parsers and the empty row it copies for each row.
 */
interface Described {
  fields: unknown;
  _parsers: unknown;
  _prebuiltEmptyResultObject: unknown;
}

/** node-postgres's Query, with the parts of it (untyped there) that KnownRowsQuery uses. */
interface QueryParts {
  name?: string;
  _result: Described;
  _accumulateRows: boolean;
  hasBeenParsed(connection: pg.Connection): boolean;
  prepare(connection: pg.Connection): void;
  handleRowDescription(message: { fields: unknown }): void;
}
const Query = pg.Query as unknown as new (
  text: string,
  values: unknown[],
  callback: (error: Error | undefined, result: pg.QueryResult) => void,
) => QueryParts & pg.Submittable;

/**
 * A run of a named statement that asks for its row description only the first time on a connection:
 * node-postgres describes the portal on every run, and taking the description apart (a services row
 * has ~60 columns) cost the server a message and Node the parsing and the result's set-up, ~4% of the
 * server's CPU under the deploy bench. The description a connection got once stays true while the
 * statement is prepared there: a schema change that alters the statement's rows makes the server refuse
 * its bind ("cached plan must not change result type"), and the statement is then prepared anew under
 * another name.
 */
class KnownRowsQuery extends Query {
  readonly #described: Map<string, Described>;

  constructor(
    name: string,
    text: string,
    values: unknown[],
    described: Map<string, Described>,
    callback: (error: Error | undefined, result: pg.QueryResult) => void,
  ) {
    // The text, not a config object: node-postgres copies a config object through its property
    // descriptors (4-20 us a statement on these machines), where it wraps a text in a new one.
    super(text, values, callback);
    this.name = name;
    this.#described = described;
  }

  override prepare(connection: pg.Connection): void {
    const known = this.name === undefined ? undefined : this.#described.get(this.name);
    if (!known || !this.hasBeenParsed(connection)) {
      super.prepare(connection);
      return;
    }
    this._result.fields = known.fields;
    this._result._parsers = known._parsers;
    this._result._prebuiltEmptyResultObject = known._prebuiltEmptyResultObject;
    this._accumulateRows = true;
    // The same messages but the portal's Describe.
    super.prepare(Object.create(connection, { describe: { value: () => undefined } }));
  }

  override handleRowDescription(message: { fields: unknown }): void {
    super.handleRowDescription(message);
    if (this.name === undefined) return;
    const { fields, _parsers, _prebuiltEmptyResultObject } = this._result;
    this.#described.set(this.name, { fields, _parsers, _prebuiltEmptyResultObject });
  }
}

export class PreparingClient extends pg.Client {
  #round = round;
  /** The row descriptions this connection got, by statement name (KnownRowsQuery). */
  readonly #described = new Map<string, Described>();

  // biome-ignore lint/suspicious/noExplicitAny: node-postgres's query is overloaded many ways.
  override query(config: any, values?: any, callback?: any): any {
    if (typeof config !== 'string' || !Array.isArray(values)) return super.query(config, values, callback);
    if (isSchemaChange(config)) round++;
    const hash = hashFor(config);
    if (!hash) return super.query(config, values, callback);
    const result = this.#prepared(hash, config, values);
    if (!callback) return result;
    // pg.Pool's query passes a callback.
    result.then(
      (value) => callback(undefined, value),
      (error: unknown) => callback(error),
    );
    return undefined;
  }

  async #prepared(hash: string, text: string, values: unknown[]): Promise<pg.QueryResult> {
    const status = this.getTransactionStatus();
    // An aborted transaction refuses every statement but its end: nothing to prepare.
    if (status === 'E') return super.query(text, values);
    if (this.#round !== round) {
      this.#round = round;
      this.#described.clear();
      await super.query('DEALLOCATE ALL');
    }
    try {
      return await new Promise<pg.QueryResult>((resolve, reject) => {
        const query = new KnownRowsQuery(
          `${hash}.${this.#round}`,
          text,
          values,
          this.#described,
          (error, result) => (error ? reject(error) : resolve(result)),
        );
        super.query(query);
      });
    } catch (error) {
      if (!replanRefused(error)) throw error;
      round++;
      if (status !== 'I') throw error;
      return super.query(text, values);
    }
  }
}

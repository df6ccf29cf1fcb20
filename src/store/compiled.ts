/**
 * Statements built and compiled by Kysely once per shape, then run with each call's values. Building
 * a query and compiling it was 14% of a busy server's CPU under the deploy bench (docs/performance.md,
 * "Node CPU a deployment, where it goes"), every time for the same text: here a statement is built the
 * first time a shape of values comes, with a placeholder in each value's place, and each run after
 * only puts the call's values in the placeholders' places. The text is the one Kysely builds, so the
 * prepared-statement clients (prepared.ts, pglite-prepared.ts), which key on it, keep hitting.
 * @module
 */
import type { CompiledQuery } from 'kysely';
import type { Db } from './database.ts';

/** What a statement's builder may return: a query builder, or `sql` (a RawBuilder, compiled with `db`). */
interface Compilable<O> {
  compile(db: Db): CompiledQuery<O>;
}

type Path = ReadonlyArray<string | number>;

/**
 * A value's placeholder while the statement is built. It cannot become text: a builder that puts a
 * value in the statement's text (sql.lit, sql.raw, a template string) fails, since that text would
 * not change with the value.
 */
class Placeholder {
  readonly path: Path;
  constructor(path: Path) {
    this.path = path;
  }
  [Symbol.toPrimitive](): never {
    throw new Error(`${this.path.join('.')} must be a parameter of a compiled statement, not its text`);
  }
}

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && Object.getPrototypeOf(value) === Object.prototype;

/**
 * The shape of a call's values: their arrays' lengths and their records' keys (in order, an undefined
 * one left out, as Kysely leaves it out of a `set` or `values`). Anything else is a value.
 */
function shapeOf(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(shapeOf).join(',')}]`;
  if (!isRecord(value)) return 'v';
  let shape = '{';
  for (const key in value) if (value[key] !== undefined) shape += `${key}:${shapeOf(value[key])},`;
  return `${shape}}`;
}

/** The values' structure with a placeholder for each value (leaving out what shapeOf leaves out). */
function placeholders(value: unknown, path: Path): unknown {
  if (Array.isArray(value)) return value.map((item, i) => placeholders(item, [...path, i]));
  if (!isRecord(value)) return new Placeholder(path);
  const out: Record<string, unknown> = {};
  for (const key in value) if (value[key] !== undefined) out[key] = placeholders(value[key], [...path, key]);
  return out;
}

const holdsPlaceholder = (value: unknown): boolean =>
  value instanceof Placeholder ||
  (Array.isArray(value)
    ? value.some(holdsPlaceholder)
    : isRecord(value) && Object.values(value).some(holdsPlaceholder));

function valueAt(values: unknown, path: Path): unknown {
  let value = values;
  for (const key of path) value = (value as Record<string | number, unknown>)[key];
  return value;
}

/** A compiled statement, and for each of its parameters where the call's value is (or none: a constant). */
interface Template<O> {
  compiled: CompiledQuery<O>;
  paths: (Path | undefined)[];
}

/** Shapes kept per statement: past it a statement is built each time (values picking columns by the caller's input, say). */
const MAX_SHAPES = 64;

/**
 * A statement built by `build` once per shape of its values `V` (shapeOf), and run with each call's.
 * `build` gets placeholders in the values' places: it must put each where a value goes, and not branch
 * on one (it may on the shape: which keys a record has, how long an array is). Arrays and records are
 * structure, so a jsonb or array column's value goes in as one value (JSON text, say); bound whole it
 * fails when built.
 */
export function compiled<V extends object, O>(
  build: (db: Db, values: V) => Compilable<O>,
): CompiledStatement<V, O> {
  return new CompiledStatement(build);
}

/** A statement built once per shape (`compiled`), run with each call's values. */
export class CompiledStatement<V extends object, O> {
  readonly #build: (db: Db, values: V) => Compilable<O>;
  readonly #templates = new Map<string, Template<O>>();

  constructor(build: (db: Db, values: V) => Compilable<O>) {
    this.#build = build;
  }

  /** The statement's text, and the call's values in their places. */
  compile(db: Db, values: V): CompiledQuery<O> {
    const shape = shapeOf(values);
    let template = this.#templates.get(shape);
    if (!template) {
      template = this.#compile(db, values);
      if (this.#templates.size < MAX_SHAPES) this.#templates.set(shape, template);
    }
    const { compiled, paths } = template;
    const parameters = paths.map((path, i) =>
      path === undefined ? compiled.parameters[i] : valueAt(values, path),
    );
    return { ...compiled, parameters };
  }

  /** Runs the statement in `db` (a transaction or not): its rows. */
  async execute(db: Db, values: V): Promise<O[]> {
    return (await db.executeQuery(this.compile(db, values))).rows;
  }

  async executeTakeFirst(db: Db, values: V): Promise<O | undefined> {
    return (await this.execute(db, values))[0];
  }

  #compile(db: Db, values: V): Template<O> {
    // A class instance would be one value in all, which no builder can take apart.
    if (!isRecord(values)) throw new Error("a compiled statement's values are a record");
    const compiled = this.#build(db, placeholders(values, []) as V).compile(db);
    const paths = compiled.parameters.map((p) => {
      if (p instanceof Placeholder) return p.path;
      // An array or record bound as one value (a jsonb or array column's) was taken for structure.
      if (holdsPlaceholder(p))
        throw new Error("a compiled statement's array or record value must be one parameter");
      return undefined;
    });
    return { compiled, paths };
  }
}

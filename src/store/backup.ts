import { type RawBuilder, sql, type Transaction } from 'kysely';
import { BACKUP_FORMAT, BackupError, type BackupManifest, withTrailer } from './backup-file.ts';
import type { Db } from './database.ts';
import type { Database } from './schema.ts';
import { sealingKeyIds } from './secret-box.ts';

/**
 * Berth's own state as a backup's lines (backup-file.ts), read in one REPEATABLE READ transaction: every
 * table of the schema (Berth's and the provider drivers'), whatever adds them, so a new table is backed
 * up without a change here. Migration histories are not copied as rows: the manifest lists them, and a
 * restore rebuilds the schema by running those migrations.
 */

/** Rows fetched per round trip through the cursor, and inserted per statement on restore. */
const BATCH = 2000;

/** Berth's migration history; a driver's is `<driver>_migrations` (providers/migrations.ts). */
const BERTH_HISTORY = 'kysely_migration';
const isHistory = (table: string) =>
  table === BERTH_HISTORY ||
  table === `${BERTH_HISTORY}_lock` ||
  table.endsWith('_migrations') ||
  table.endsWith('_migrations_lock');

interface TableHeader {
  table: string;
  columns: string[];
  rows: number;
}

async function tablesOf(db: Db | Transaction<Database>): Promise<string[]> {
  const { rows } = await sql<{ name: string }>`
    SELECT relname AS name FROM pg_class
    WHERE relkind = 'r' AND relnamespace = current_schema()::regnamespace
    ORDER BY relname`.execute(db);
  return rows.map((r) => r.name);
}

/** The columns a row is written with: generated ones are computed again. */
async function columnsOf(db: Db | Transaction<Database>, table: string): Promise<string[]> {
  const { rows } = await sql<{ name: string }>`
    SELECT attname AS name FROM pg_attribute
    WHERE attrelid = to_regclass(${table}) AND attnum > 0 AND NOT attisdropped AND attgenerated = ''
    ORDER BY attnum`.execute(db);
  return rows.map((r) => r.name);
}

/** Every migration history in the database: `berth`, and each driver's by its name. */
async function histories(
  db: Db | Transaction<Database>,
  tables: string[],
): Promise<Record<string, string[]>> {
  const found: Record<string, string[]> = {};
  for (const table of tables) {
    if (table !== BERTH_HISTORY && !table.endsWith('_migrations')) continue;
    const { rows } = await sql<{ name: string }>`
      SELECT name FROM ${sql.table(table)} ORDER BY timestamp, name`.execute(db);
    found[table === BERTH_HISTORY ? 'berth' : table.slice(0, -'_migrations'.length)] = rows.map(
      (r) => r.name,
    );
  }
  return found;
}

const line = (value: unknown) => `${JSON.stringify(value)}\n`;

/**
 * One row, one line. A line break in JSON text can only be whitespace (inside a string it is escaped),
 * kept verbatim from a `json` column's value: a space means the same.
 */
const oneLine = (json: string) => (/[\r\n]/.test(json) ? json.replace(/[\r\n]/g, ' ') : json);

/**
 * The backup's lines, trailer included. The transaction stays open until the last line is taken, so a
 * caller should write them somewhere fast (a file) rather than to a slow reader: on the embedded
 * database it holds the one connection meanwhile.
 */
export async function* backupLines(
  db: Db,
  about: { version: string; database: BackupManifest['database']; now?: Date },
): AsyncGenerator<string> {
  const trx = await db
    .startTransaction()
    .setIsolationLevel('repeatable read')
    .setAccessMode('read only')
    .execute();
  try {
    const all = await tablesOf(trx);
    const migrations = await histories(trx, all);
    const berth = migrations.berth ?? [];
    const manifest: BackupManifest = {
      berth_backup: BACKUP_FORMAT,
      berth_version: about.version,
      database: about.database,
      created_at: (about.now ?? new Date()).toISOString(),
      migration: berth.at(-1) ?? '',
      migrations,
      master_key_ids: await sealingKeyIds(trx),
    };
    const counts: Record<string, number> = {};
    async function* body(): AsyncGenerator<string> {
      yield line(manifest);
      for (const table of all.filter((t) => !isHistory(t))) {
        const { rows } = await sql<{
          n: string | number;
        }>`SELECT count(*) AS n FROM ${sql.table(table)}`.execute(trx);
        const header: TableHeader = {
          table,
          columns: await columnsOf(trx, table),
          rows: Number(rows[0]?.n ?? 0),
        };
        counts[table] = header.rows;
        yield line(header);
        if (header.rows === 0) continue;
        // A cursor walks the table once, in whatever order it lies: no sort, no key needed.
        // row_to_json takes half the time of to_jsonb on the embedded database.
        await sql`DECLARE berth_backup NO SCROLL CURSOR FOR
                  SELECT row_to_json(t)::text AS row FROM ${sql.table(table)} t`.execute(trx);
        for (;;) {
          const batch = await sql<{ row: string }>`FETCH ${sql.raw(String(BATCH))} FROM berth_backup`.execute(
            trx,
          );
          for (const r of batch.rows) yield `${oneLine(r.row)}\n`;
          if (batch.rows.length < BATCH) break;
        }
        await sql`CLOSE berth_backup`.execute(trx);
      }
      const sequences = await sql<{ name: string; value: string | null }>`
        SELECT sequencename AS name, last_value::text AS value FROM pg_sequences
        WHERE schemaname = current_schema() ORDER BY sequencename`.execute(trx);
      yield line({ sequences: Object.fromEntries(sequences.rows.map((s) => [s.name, s.value])) });
    }
    yield* withTrailer(body(), counts);
  } finally {
    await trx.rollback().execute();
  }
}

/** True when no table of the schema (migration histories aside) holds a row. */
export async function isEmptyDatabase(db: Db): Promise<boolean> {
  for (const table of (await tablesOf(db)).filter((t) => !isHistory(t))) {
    const { rows } = await sql<{
      any: boolean;
    }>`SELECT EXISTS (SELECT 1 FROM ${sql.table(table)}) AS any`.execute(db);
    if (rows[0]?.any) return false;
  }
  return true;
}

/** The migration histories the database has (as the manifest lists them). */
export async function migrationHistories(db: Db): Promise<Record<string, string[]>> {
  return histories(db, await tablesOf(db));
}

/**
 * A loader of a backup's lines (what readBackupFile hands over) into `trx`, on a database whose schema
 * is the backup's. Like pg_dump's restore: triggers are off while rows go in (a restored secret is no new
 * event, and no webhook goes out for it), foreign keys are dropped and made again once every row is in
 * (rows may come in any order), and each sequence is set where it was. It all happens in the caller's
 * transaction: a failure leaves nothing behind.
 */
export async function backupLoader(trx: Transaction<Database>): Promise<{
  line(text: string): Promise<void>;
  finish(): Promise<void>;
}> {
  const { rows: foreignKeys } = await sql<{ table: string; name: string; definition: string }>`
    SELECT conrelid::regclass::text AS table, conname AS name, pg_get_constraintdef(oid) AS definition
    FROM pg_constraint WHERE contype = 'f' AND connamespace = current_schema()::regnamespace`.execute(trx);
  for (const fk of foreignKeys) {
    await sql`ALTER TABLE ${sql.table(fk.table)} DROP CONSTRAINT ${sql.ref(fk.name)}`.execute(trx);
  }
  const disabled: string[] = [];
  let current: (TableHeader & { seen: number }) | undefined;
  let batch: string[] = [];
  const flush = async () => {
    if (!current || batch.length === 0) return;
    const columns = sql.join(current.columns.map((c) => sql.ref(c)));
    await sql`INSERT INTO ${sql.table(current.table)} (${columns})
              SELECT ${columns} FROM jsonb_populate_recordset(NULL::${sql.table(current.table)}, ${`[${batch.join(',')}]`}::jsonb)`.execute(
      trx,
    );
    batch = [];
  };
  const expectRowsDone = () => {
    if (current && current.seen !== current.rows) {
      throw new BackupError(
        `the backup's table ${current.table} has ${current.seen} rows, its header says ${current.rows}`,
      );
    }
  };
  return {
    async line(text) {
      if (current && current.seen < current.rows) {
        current.seen++;
        batch.push(text);
        if (batch.length >= BATCH) await flush();
        return;
      }
      await flush();
      expectRowsDone();
      const parsed = JSON.parse(text) as Partial<TableHeader> & { sequences?: Record<string, string | null> };
      if (parsed.sequences) {
        current = undefined;
        for (const [name, value] of Object.entries(parsed.sequences)) {
          if (value !== null)
            await sql`SELECT setval(${name}::regclass, ${value}::bigint, true)`.execute(trx);
        }
        return;
      }
      const { table, columns, rows } = parsed as TableHeader;
      const present = new Set(await columnsOf(trx, table));
      const missing = columns.filter((c) => !present.has(c));
      if (present.size === 0 || missing.length > 0) {
        throw new BackupError(
          `the backup's table ${table} does not fit this database's schema (${missing.join(', ') || 'no such table'})`,
        );
      }
      await sql`ALTER TABLE ${sql.table(table)} DISABLE TRIGGER USER`.execute(trx);
      disabled.push(table);
      current = { table, columns, rows, seen: 0 };
    },
    async finish() {
      await flush();
      expectRowsDone();
      for (const table of disabled) {
        await sql`ALTER TABLE ${sql.table(table)} ENABLE TRIGGER USER`.execute(trx);
      }
      for (const fk of foreignKeys) {
        const definition: RawBuilder<unknown> = sql.raw(fk.definition);
        await sql`ALTER TABLE ${sql.table(fk.table)} ADD CONSTRAINT ${sql.ref(fk.name)} ${definition}`.execute(
          trx,
        );
      }
    },
  };
}

import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { sql } from 'kysely';
import { openStore, type Store } from './database.ts';

// The dialect is the embedded database's: these tests open one whatever BERTH_TEST_DATABASE says.
const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-prepared-'));
let store: Store;
before(async () => {
  store = await openStore({ databaseUrl: undefined, dataDir, migrate: false });
  await sql`CREATE TABLE prepared_t (id int PRIMARY KEY, name text, at timestamptz, doc jsonb, tags text[], n bigint)`.execute(
    store.db,
  );
});
after(async () => {
  await store.close();
  fs.rmSync(dataDir, { recursive: true, force: true });
});

const prepared = async (text: string) => {
  const { rows } = await sql<{ n: number }>`
    SELECT count(*)::int AS n FROM pg_prepared_statements WHERE statement = ${text}`.execute(store.db);
  return rows[0]?.n;
};

test('a statement is prepared once and run from then on by name', async () => {
  for (let i = 0; i < 3; i++) {
    const { rows } = await sql`SELECT name FROM prepared_t WHERE id = ${i}`.execute(store.db);
    assert.deepEqual(rows, []);
  }
  assert.equal(await prepared('SELECT name FROM prepared_t WHERE id = $1'), 1);
});

test('values go in and come out as PGlite query() gives them: dates, jsonb, arrays, bigints, nulls', async () => {
  const at = new Date('2026-11-27T10:00:00.123Z');
  const insert = () =>
    sql<Record<string, unknown>>`
      INSERT INTO prepared_t (id, name, at, doc, tags, n) VALUES (${2}, ${null}, ${at}, ${JSON.stringify({ a: [1, 'x'] })},
        ${['a', 'b c']}, ${'9007199254740993'}) RETURNING *`.execute(store.db);
  const { rows, numAffectedRows } = await insert();
  assert.equal(numAffectedRows, 1n);
  assert.deepEqual(rows, [
    { id: 2, name: null, at, doc: { a: [1, 'x'] }, tags: ['a', 'b c'], n: 9007199254740993n },
  ]);
  const again = await sql`UPDATE prepared_t SET name = ${'two'} WHERE id = ${2}`.execute(store.db);
  assert.equal(again.numAffectedRows, 1n);
  assert.deepEqual(again.rows, []);
});

test("an error is PGlite's (its code, the statement on it) and the statement runs again after", async () => {
  const insert = (id: number) => sql`INSERT INTO prepared_t (id) VALUES (${id})`.execute(store.db);
  await insert(3);
  await assert.rejects(insert(3), (error: { code?: string; query?: string }) => {
    assert.equal(error.code, '23505');
    assert.equal(error.query, 'INSERT INTO prepared_t (id) VALUES ($1)');
    return true;
  });
  await insert(4);
  // In a transaction, the failed statement aborts it; a rollback leaves the connection usable.
  await assert.rejects(
    store.db.transaction().execute(async (trx) => {
      await sql`INSERT INTO prepared_t (id) VALUES (${5})`.execute(trx);
      await sql`INSERT INTO prepared_t (id) VALUES (${3})`.execute(trx);
    }),
    { code: '23505' },
  );
  const { rows } = await sql<{ id: number }>`SELECT id FROM prepared_t WHERE id = ${5}`.execute(store.db);
  assert.deepEqual(rows, []);
});

test('a transaction commits, or rolls back what it wrote when its callback throws', async () => {
  await store.db.transaction().execute(async (trx) => {
    await sql`INSERT INTO prepared_t (id) VALUES (${6})`.execute(trx);
  });
  await assert.rejects(
    store.db.transaction().execute(async (trx) => {
      await sql`INSERT INTO prepared_t (id) VALUES (${7})`.execute(trx);
      throw new Error('no');
    }),
    /no/,
  );
  const { rows } = await sql<{
    id: number;
  }>`SELECT id FROM prepared_t WHERE id IN (${6}, ${7}) ORDER BY id`.execute(store.db);
  assert.deepEqual(rows, [{ id: 6 }]);
});

test('after DDL a kept statement is prepared again: it sees the new columns', async () => {
  await sql`CREATE TABLE prepared_ddl (id int)`.execute(store.db);
  await sql`INSERT INTO prepared_ddl VALUES (${1})`.execute(store.db);
  const all = () => sql<Record<string, unknown>>`SELECT * FROM prepared_ddl`.execute(store.db);
  assert.deepEqual((await all()).rows, [{ id: 1 }]);
  await sql`ALTER TABLE prepared_ddl ADD COLUMN name text DEFAULT 'x'`.execute(store.db);
  assert.deepEqual((await all()).rows, [{ id: 1, name: 'x' }]);
  // A migration's statement may start with a comment.
  await sql`-- the second column
    ALTER TABLE prepared_ddl ADD COLUMN n int DEFAULT 2`.execute(store.db);
  assert.deepEqual((await all()).rows, [{ id: 1, name: 'x', n: 2 }]);
  assert.equal(await prepared('SELECT * FROM prepared_ddl'), 1);
});

test('statements made per call do not pile up: at most 500 are kept', async () => {
  for (let i = 0; i < 520; i++) await sql`SELECT ${sql.lit(i)}::int AS i`.execute(store.db);
  const { rows } = await sql<{ n: number }>`SELECT count(*)::int AS n FROM pg_prepared_statements`.execute(
    store.db,
  );
  assert.ok(Number(rows[0]?.n) <= 501, `${rows[0]?.n} prepared statements`);
});

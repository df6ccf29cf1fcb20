import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, test } from 'node:test';
import pg from 'pg';
import { createTestDatabase, TEST_DATABASE, type TestDatabase } from '../../test/helpers/database.ts';
import { MAX_NAMED, PreparingClient } from './prepared.ts';

const skip = TEST_DATABASE !== 'postgres' && 'prepared statements are node-postgres (Postgres) only';
let database: TestDatabase;
let pool: pg.Pool;
before(async () => {
  if (skip) return;
  database = await createTestDatabase('postgres');
  // One connection, so every statement meets the same connection's prepared statements.
  pool = new pg.Pool({ connectionString: database.databaseUrl, max: 1, Client: PreparingClient });
});
after(async () => {
  if (skip) return;
  await pool.end();
  await database.drop();
});

const table = () => `t_${randomBytes(4).toString('hex')}`;
const prepared = async (text: string) => {
  const { rows } = await pool.query<{ n: string }>(
    'SELECT count(*) AS n FROM pg_prepared_statements WHERE statement = $1',
    [text],
  );
  return Number(rows[0]?.n);
};

test('a statement sent a second time runs prepared; a one-off is not kept', { skip }, async () => {
  const name = table();
  await pool.query(`CREATE TABLE ${name} (id int)`);
  const insert = `INSERT INTO ${name} (id) VALUES ($1)`;
  await pool.query(insert, [1]);
  assert.equal(await prepared(insert), 0, 'a text seen once runs unnamed');
  await pool.query(insert, [2]);
  await pool.query(insert, [3]);
  assert.equal(await prepared(insert), 1, 'seen again, it is prepared once on the connection');
  const { rows } = await pool.query(`SELECT id FROM ${name} ORDER BY id`, []);
  assert.deepEqual(
    rows.map((r) => r.id),
    [1, 2, 3],
  );
});

/** A new table, and a read of it sent twice: the connection holds it prepared. */
async function preparedRead(): Promise<{ name: string; read: string }> {
  const name = table();
  await pool.query(`CREATE TABLE ${name} (id int)`);
  const read = `SELECT * FROM ${name} WHERE id = $1`;
  await pool.query(read, [1]);
  await pool.query(read, [1]);
  return { name, read };
}

// What a newer process's migration does under an older process's connections.
async function alterElsewhere(sql: string) {
  const other = new pg.Client({ connectionString: database.databaseUrl });
  await other.connect();
  await other.query(sql);
  await other.end();
}

test("a statement refused for its table's new shape is answered unnamed outside a transaction, and prepared anew", {
  skip,
}, async () => {
  const { name, read } = await preparedRead();
  await pool.query(`INSERT INTO ${name} VALUES (1)`);
  assert.equal(await prepared(read), 1);
  await alterElsewhere(`ALTER TABLE ${name} ADD COLUMN extra int DEFAULT 7`);
  assert.deepEqual((await pool.query(read, [1])).rows, [{ id: 1, extra: 7 }]);
  assert.deepEqual((await pool.query(read, [1])).rows, [{ id: 1, extra: 7 }]);
  assert.equal(await prepared(read), 1, 'the refused one was dropped, the statement prepared again');
});

test("inside a transaction the refusal is the transaction's error, and the next run is answered", {
  skip,
}, async () => {
  const { name, read } = await preparedRead();
  await alterElsewhere(`ALTER TABLE ${name} ADD COLUMN extra int`);
  const client = await pool.connect();
  try {
    await client.query('BEGIN', []);
    await assert.rejects(client.query(read, [1]), /cached plan must not change result type/);
    await client.query('ROLLBACK', []);
    await client.query('BEGIN', []);
    assert.deepEqual((await client.query(read, [1])).fields.length, 2);
    await client.query('COMMIT', []);
  } finally {
    client.release();
  }
});

test('a schema change sent through the process drops the prepared statements first: no refusal', {
  skip,
}, async () => {
  const { name, read } = await preparedRead();
  assert.equal(await prepared(read), 1);
  const columnsInTransaction = async () => {
    const client = await pool.connect();
    try {
      await client.query('BEGIN', []);
      const { fields } = await client.query(read, [1]);
      await client.query('COMMIT', []);
      return fields.length;
    } finally {
      client.release();
    }
  };
  await pool.query(`ALTER TABLE ${name} ADD COLUMN extra int`, []);
  assert.equal(await columnsInTransaction(), 2);
  // A migration's statement may open with a comment, or be a DO block.
  await pool.query(`-- the third column\n  ALTER TABLE ${name} ADD COLUMN more int`, []);
  assert.equal(await columnsInTransaction(), 3);
  await pool.query(`DO $$ BEGIN ALTER TABLE ${name} ADD COLUMN most int; END $$`, []);
  assert.equal(await columnsInTransaction(), 4);
});

test("a prepared statement's rows are described once on a connection, and read the same after", {
  skip,
}, async () => {
  const { name, read } = await preparedRead();
  await pool.query(`ALTER TABLE ${name} ADD COLUMN at timestamptz, ADD COLUMN note text`, []);
  await pool.query(`INSERT INTO ${name} VALUES (1, '2026-11-27T12:00:00Z', NULL)`, []);
  const client = await pool.connect();
  try {
    let described = 0;
    const connection = (client as unknown as { connection: pg.Connection }).connection;
    const count = () => described++;
    connection.on('rowDescription', count);
    const runs = [];
    for (let i = 0; i < 3; i++) runs.push((await client.query(read, [1])).rows);
    connection.off('rowDescription', count);
    assert.equal(described, 1, 'described on the first run after the change, not again');
    for (const rows of runs)
      assert.deepEqual(rows, [{ id: 1, at: new Date('2026-11-27T12:00:00Z'), note: null }]);
  } finally {
    client.release();
  }
});

test('at most MAX_NAMED texts are prepared; later ones run unnamed', { skip }, async () => {
  const text = (i: number) => `SELECT $1::int + ${i} AS n`;
  for (let i = 0; i <= MAX_NAMED; i++) {
    await pool.query(text(i), [1]);
    assert.deepEqual((await pool.query(text(i), [1])).rows, [{ n: 1 + i }]);
  }
  assert.equal(await prepared(text(0)), 1);
  assert.equal(await prepared(text(MAX_NAMED)), 0, 'past the bound');
  const { rows } = await pool.query('SELECT count(*)::int AS n FROM pg_prepared_statements', []);
  assert.ok(rows[0].n <= MAX_NAMED, `${rows[0].n} prepared`);
});

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { sql } from 'kysely';
import { createTestDatabase, type TestDatabase } from '../../test/helpers/database.ts';
import { compiled } from './compiled.ts';
import { openStore, type Store } from './database.ts';

let database: TestDatabase;
let store: Store;
before(async () => {
  database = await createTestDatabase();
  store = await openStore({ databaseUrl: database.databaseUrl, dataDir: database.dataDir, migrate: false });
  await sql`CREATE TABLE compiled_t (id int PRIMARY KEY, name text, at timestamptz)`.execute(store.db);
});
after(async () => {
  await store.close();
  await database.drop();
});

test('a compiled statement has the text and parameters Kysely builds each time, whatever the values', () => {
  const build = (id: string, now: Date) =>
    store.db
      .updateTable('services')
      .set({ state: 'deploying', updated_at: now })
      .where('id', '=', id)
      .where('state', 'in', ['deploy_queued', 'running'])
      .returning(['id', 'state']);
  const statement = compiled((db, v: { id: string; now: Date }) =>
    db
      .updateTable('services')
      .set({ state: 'deploying', updated_at: v.now })
      .where('id', '=', v.id)
      .where('state', 'in', ['deploy_queued', 'running'])
      .returning(['id', 'state']),
  );
  for (const [id, now] of [
    ['a', new Date(1)],
    ['b', new Date(2)],
  ] as const) {
    const once = statement.compile(store.db, { id, now });
    const built = build(id, now).compile();
    assert.equal(once.sql, built.sql);
    assert.deepEqual(once.parameters, built.parameters);
  }
});

test('a compiled statement runs with each call its own values, in a transaction or not', async () => {
  const insert = compiled(
    (_db, v: { id: number; name: string; at: Date }) =>
      sql<{
        id: number;
      }>`INSERT INTO compiled_t (id, name, at) VALUES (${v.id}, ${v.name}, ${v.at}) RETURNING id`,
  );
  const read = compiled(
    (_db, v: { id: number }) =>
      sql<{ name: string; at: Date }>`SELECT name, at FROM compiled_t WHERE id = ${v.id}`,
  );
  assert.deepEqual(await insert.execute(store.db, { id: 1, name: 'one', at: new Date(1000) }), [{ id: 1 }]);
  await store.db
    .transaction()
    .execute((trx) => insert.execute(trx, { id: 2, name: 'two', at: new Date(2000) }));
  assert.deepEqual(await read.executeTakeFirst(store.db, { id: 1 }), { name: 'one', at: new Date(1000) });
  assert.deepEqual(await read.executeTakeFirst(store.db, { id: 2 }), { name: 'two', at: new Date(2000) });
  assert.equal(await read.executeTakeFirst(store.db, { id: 3 }), undefined);
});

test("a value put in a compiled statement's text fails when it is built, not with another call's value", () => {
  const literal = compiled(
    (_db, v: { name: string }) => sql`SELECT 1 FROM compiled_t WHERE name = ${sql.lit(v.name)}`,
  );
  assert.throws(() => literal.compile(store.db, { name: 'x' }), /must be a parameter/);
  const text = compiled((_db, v: { name: string }) =>
    sql.raw(`SELECT 1 FROM compiled_t WHERE name = '${v.name}'`),
  );
  assert.throws(() => text.compile(store.db, { name: 'x' }), /must be a parameter/);
});

test("each shape of values is its own statement: an array's length, a record's keys (an undefined one left out)", async () => {
  await sql`INSERT INTO compiled_t (id, name) VALUES (10, 'ten'), (11, 'eleven'), (12, 'ten')`.execute(
    store.db,
  );
  const pick = compiled((_db, v: { ids: number[]; name?: string }) => {
    const named = v.name === undefined ? sql`` : sql`AND name = ${v.name}`;
    return sql<{
      id: number;
    }>`SELECT id FROM compiled_t WHERE id IN (${sql.join([0, ...v.ids])}) ${named} ORDER BY id`;
  });
  const ids = async (values: { ids: number[]; name?: string }) =>
    (await pick.execute(store.db, values)).map((r) => r.id);
  assert.deepEqual(await ids({ ids: [] }), []);
  assert.deepEqual(await ids({ ids: [10] }), [10]);
  assert.deepEqual(await ids({ ids: [10, 11, 12] }), [10, 11, 12]);
  assert.deepEqual(await ids({ ids: [11] }), [11]);
  assert.deepEqual(await ids({ ids: [10, 11, 12], name: 'ten' }), [10, 12]);
  assert.deepEqual(await ids({ ids: [10, 11, 12], name: undefined }), [10, 11, 12]);
  assert.deepEqual(await ids({ ids: [10, 11], name: 'eleven' }), [11]);
});

test('an array bound as one value (an array column) fails when built: arrays are structure', () => {
  const tagged = compiled((db, v: { id: string; tags: 'service.updated'[] }) =>
    db.updateTable('webhooks').set({ event_types: v.tags }).where('id', '=', v.id),
  );
  assert.throws(
    () => tagged.compile(store.db, { id: 'x', tags: ['service.updated'] }),
    /must be one parameter/,
  );
});

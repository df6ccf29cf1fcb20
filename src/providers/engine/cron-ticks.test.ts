import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, test } from 'node:test';
import { createTestDatabase, type TestDatabase } from '../../../test/helpers/database.ts';
import { openStore, type Store } from '../../store/database.ts';
import { migrateDriver } from '../migrations.ts';
import { claimTick, SERVICE_TICK } from './cron-ticks.ts';
import { type DockerDb, dockerMigrations, dockerTables } from './tables.ts';

let database: TestDatabase;
let store: Store;
let db: DockerDb;

before(async () => {
  database = await createTestDatabase();
  store = await openStore({ databaseUrl: database.databaseUrl, dataDir: database.dataDir });
  await migrateDriver(store.db, 'docker', dockerMigrations);
  db = dockerTables(store.db);
});
after(async () => {
  await store?.close();
  await database?.drop();
});

test('of claims of one tick racing, exactly one lands; its scheduled second names it, not the moment of the claim', async () => {
  const service = randomUUID();
  const at = new Date('2026-11-28T10:00:07.000Z');
  // Schedulers fire a few milliseconds apart: every one names the same second.
  const claims = await Promise.all(
    Array.from({ length: 8 }, (_, i) => claimTick(db, service, SERVICE_TICK, new Date(at.getTime() + i * 7))),
  );
  assert.equal(claims.filter(Boolean).length, 1, `claims: ${claims.join(', ')}`);
  assert.equal(
    await claimTick(db, service, SERVICE_TICK, new Date(at.getTime() + 1000)),
    true,
    'the next second',
  );
});

test("a service's own tick and each ops.json cron job of it are claimed apart", async () => {
  const service = randomUUID();
  const at = new Date('2026-11-28T10:00:00.000Z');
  assert.equal(await claimTick(db, service, SERVICE_TICK, at), true);
  assert.equal(await claimTick(db, service, '* * * * * * /a', at), true);
  assert.equal(await claimTick(db, service, '* * * * * * /b', at), true);
  assert.equal(await claimTick(db, service, '* * * * * * /b', at), false);
  assert.equal(await claimTick(db, randomUUID(), '* * * * * * /b', at), true, 'another service');
});

test('a claim clears the service’s claims older than a day, and only its own', async () => {
  const [service, other] = [randomUUID(), randomUUID()];
  const old = new Date(Date.now() - 25 * 3600_000);
  await db
    .insertInto('docker_cron_ticks')
    .values([service, other].map((id) => ({ service_id: id, job: SERVICE_TICK, tick_at: old })))
    .execute();
  await claimTick(db, service, SERVICE_TICK, new Date());
  const left = await db.selectFrom('docker_cron_ticks').select(['service_id', 'tick_at']).execute();
  assert.equal(left.filter((r) => r.service_id === service).length, 1);
  assert.equal(left.filter((r) => r.service_id === other).length, 1);
});

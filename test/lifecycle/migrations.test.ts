import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { sql } from 'kysely';
import { dockerMigrations } from '../../src/providers/engine/tables.ts';
import { migrateDriver } from '../../src/providers/migrations.ts';
import { simMigrations } from '../../src/providers/sim/tables.ts';
import { type Db, openStore, type Store } from '../../src/store/database.ts';
import { migrateToLatest } from '../../src/store/migrate.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/database.ts';
import { type Harness, startHarness, type Tenant, VALID_SERVICE } from '../helpers/harness.ts';

async function columnsOf(db: Db, table: string): Promise<string[]> {
  const result = await sql<{ column_name: string }>`
    SELECT column_name FROM information_schema.columns WHERE table_name = ${table} ORDER BY column_name`.execute(
    db,
  );
  return result.rows.map((r) => r.column_name);
}

async function executed(db: Db, history: string): Promise<string[]> {
  const result = await sql<{ name: string }>`SELECT name FROM ${sql.table(history)} ORDER BY name`.execute(
    db,
  );
  return result.rows.map((r) => r.name);
}

const SIM_WORKLOADS = [
  'cron_jobs',
  'deployment_id',
  'generation',
  'replicas',
  'run_status',
  'service_id',
  'target',
  'updated_at',
  'variables',
];
const DOCKER_ROUTES = [
  'deployment_id',
  'domains',
  'environment_id',
  'generation',
  'ops',
  'port',
  'service_id',
  'subdomain',
  'type',
  'updated_at',
];

describe('drivers own their tables', () => {
  let database: TestDatabase;
  let store: Store;
  before(async () => {
    database = await createTestDatabase();
  });
  after(async () => {
    await store?.close();
    await database.drop();
  });

  test("Berth's migrations create no driver table; each driver's migrations create its own", async () => {
    store = await openStore({ databaseUrl: database.databaseUrl, dataDir: database.dataDir });
    for (const table of ['sim_workloads', 'sim_calls', 'docker_routes']) {
      assert.deepEqual(await columnsOf(store.db, table), [], `${table} is not Berth's`);
    }
    await migrateDriver(store.db, 'sim', simMigrations);
    await migrateDriver(store.db, 'docker', dockerMigrations);
    assert.deepEqual(await columnsOf(store.db, 'sim_workloads'), SIM_WORKLOADS);
    assert.ok((await columnsOf(store.db, 'sim_calls')).includes('outcome'));
    assert.deepEqual(await columnsOf(store.db, 'docker_routes'), DOCKER_ROUTES);
    assert.deepEqual(await executed(store.db, 'sim_migrations'), Object.keys(simMigrations).sort());
    assert.deepEqual(await executed(store.db, 'docker_migrations'), Object.keys(dockerMigrations).sort());
    await store.close();
  });
});

describe('a database the old core migrations made', () => {
  let database: TestDatabase;
  let store: Store;
  before(async () => {
    database = await createTestDatabase();
    store = await openStore({ databaseUrl: database.databaseUrl, dataDir: database.dataDir });
  });
  after(async () => {
    await store.close();
    await database.drop();
  });

  test('keeps its driver tables and rows: the driver migrations find them in place', async () => {
    const { db } = store;
    // As Berth's migrations 0002 and 0004 used to create them.
    await sql`CREATE TABLE sim_workloads (service_id uuid PRIMARY KEY, deployment_id uuid NOT NULL,
      target text NOT NULL, replicas integer NOT NULL, run_status text NOT NULL,
      updated_at timestamptz NOT NULL DEFAULT clock_timestamp())`.execute(db);
    await sql`CREATE TABLE sim_calls (id bigserial PRIMARY KEY, operation text NOT NULL,
      subject_id uuid NOT NULL, service_id uuid, worker text NOT NULL, outcome text,
      started_at timestamptz NOT NULL DEFAULT clock_timestamp(), finished_at timestamptz)`.execute(db);
    await sql`CREATE INDEX sim_calls_by_subject ON sim_calls (subject_id)`.execute(db);
    await sql`CREATE TABLE docker_routes (service_id uuid PRIMARY KEY, deployment_id uuid NOT NULL,
      port integer, ops jsonb NOT NULL,
      updated_at timestamptz(3) NOT NULL DEFAULT clock_timestamp())`.execute(db);
    const serviceId = randomUUID();
    await sql`INSERT INTO sim_workloads (service_id, deployment_id, target, replicas, run_status)
      VALUES (${serviceId}, ${randomUUID()}, 'v1', 2, 'running')`.execute(db);
    await sql`INSERT INTO docker_routes (service_id, deployment_id, port, ops)
      VALUES (${serviceId}, ${randomUUID()}, 8080, '{}')`.execute(db);
    // The sim's later migration had run already; the docker driver's had not.
    const { '0000-tables': _created, ...later } = simMigrations;
    await migrateDriver(db, 'sim', later);

    await migrateDriver(db, 'sim', simMigrations);
    await migrateDriver(db, 'docker', dockerMigrations);

    assert.deepEqual(await columnsOf(db, 'sim_workloads'), SIM_WORKLOADS);
    assert.deepEqual(await columnsOf(db, 'docker_routes'), DOCKER_ROUTES);
    const workload = await sql<{ run_status: string }>`SELECT run_status FROM sim_workloads`.execute(db);
    assert.deepEqual(workload.rows, [{ run_status: 'running' }]);
    const route = await sql<{ port: number }>`SELECT port FROM docker_routes`.execute(db);
    assert.deepEqual(route.rows, [{ port: 8080 }]);
    assert.deepEqual(await executed(db, 'sim_migrations'), Object.keys(simMigrations).sort());
    assert.deepEqual(await executed(db, 'docker_migrations'), Object.keys(dockerMigrations).sort());
    // Starting again changes nothing.
    await migrateDriver(db, 'sim', simMigrations);
    await migrateDriver(db, 'docker', dockerMigrations);
  });
});

// The data migrations below run on a database with Berth's tables in use: one app for both.
let h: Harness;
let t: Tenant;
before(async () => {
  h = await startHarness();
  t = await h.tenant();
});
after(() => h.close());

async function newServiceId(): Promise<string> {
  const created = await h.request('POST', `/v1/environments/${t.envId}/services`, {
    token: t.token,
    body: VALID_SERVICE.docker,
  });
  assert.equal(created.status, 200);
  return created.body.data.service.id;
}

describe('secrets jobs queued before their kind named the scope', () => {
  test('are given the scope of their subject by migration 0012', async () => {
    const serviceId = await newServiceId();
    const { db } = h.deps.store;
    await db.deleteFrom('jobs').execute();
    for (const subject of [serviceId, t.envId]) {
      await sql`INSERT INTO jobs (kind, subject_id, queue_key, max_attempts)
        VALUES ('write_secrets', ${subject}, ${subject}, 8)`.execute(db);
    }
    await sql`DELETE FROM kysely_migration WHERE name = '0012-secret-job-scopes'`.execute(db);
    await migrateToLatest(db);
    const jobs = await db.selectFrom('jobs').select(['kind', 'subject_id']).execute();
    assert.deepEqual(Object.fromEntries(jobs.map((j) => [j.subject_id, j.kind])), {
      [serviceId]: 'write_service_secrets',
      [t.envId]: 'write_environment_secrets',
    });
  });
});

describe('services stored with the old array form of ops.json dependencies', () => {
  test('are rewritten to the hosted form by migration 0014, keeping ids, kinds, exports and other keys', async () => {
    const serviceId = await newServiceId();
    const { db } = h.deps.store;
    const old = {
      deploy_timeout: 7,
      dependencies: [
        { id: 'main-db', kind: 'rds', exports: { DB_HOST: '$address' } },
        { id: 'files', kind: 's3', exports: { BUCKET: '$name' } },
        { id: 'more', kind: 's3' },
        { id: 'sql', kind: 'gcp:cloudsql', exports: { X: '$host' } },
      ],
    };
    await db
      .updateTable('services')
      .set({ ops_json: JSON.stringify(old) })
      .where('id', '=', serviceId)
      .execute();
    await sql`DELETE FROM kysely_migration WHERE name = '0014-ops-json-hosted-dependencies'`.execute(db);
    await migrateToLatest(db);
    const res = await h.request('GET', `/v1/environments/${t.envId}/services/${serviceId}`, {
      token: t.token,
    });
    assert.equal(res.status, 200);
    assert.deepEqual(JSON.parse(res.body.data.service.ops_json), {
      deploy_timeout: 7,
      dependencies: {
        rds: { instances: [{ id: 'main-db', exports: { DB_HOST: '$address' } }] },
        s3: { buckets: [{ id: 'files', exports: { BUCKET: '$name' } }, { id: 'more' }] },
        'gcp:cloudsql': { resources: [{ id: 'sql', exports: { X: '$host' } }] },
      },
    });
    assert.deepEqual(res.body.data.service.ops_dependencies, [
      { id: 'main-db', kind: 'rds', exports: { DB_HOST: '$address' } },
      { id: 'files', kind: 's3', exports: { BUCKET: '$name' } },
      { id: 'more', kind: 's3', exports: {} },
      { id: 'sql', kind: 'gcp:cloudsql', exports: { X: '$host' } },
    ]);
    // The migrated document passes the rules: a PATCH of another field is accepted.
    const patched = await h.request('PATCH', `/v1/environments/${t.envId}/services/${serviceId}`, {
      token: t.token,
      body: { replica_count: 1 },
    });
    assert.equal(patched.status, 200, JSON.stringify(patched.body));
  });
});

describe('jobs queued before jobs named their account', () => {
  test('are given the account of their subject by migration 0029, and the fan-out trigger names it after', async () => {
    const serviceId = await newServiceId();
    const { db } = h.deps.store;
    await db.deleteFrom('jobs').execute();
    const webhook = await h.request('POST', '/v1/webhooks', {
      token: t.token,
      body: { url: 'http://93.184.216.34/hook', event_types: ['secret.created'] },
    });
    assert.equal(webhook.status, 200, webhook.raw);
    const deploy = await h.request('POST', `/v1/environments/${t.envId}/services/${serviceId}/deploy`, {
      token: t.token,
      body: {},
    });
    assert.equal(deploy.status, 200, deploy.raw);
    const put = await h.request('PUT', `/v1/environments/${t.envId}/secrets`, {
      token: t.token,
      body: { secrets: [{ key: 'BEFORE', value: 'v' }] },
    });
    assert.equal(put.status, 200, put.raw);
    await sql`ALTER TABLE jobs DROP COLUMN account_id`.execute(db);
    await sql`DELETE FROM kysely_migration WHERE name = '0029-job-accounts'`.execute(db);
    await migrateToLatest(db);
    const before = await db.selectFrom('jobs').select(['kind', 'account_id']).orderBy('kind').execute();
    assert.deepEqual(before, [
      { kind: 'deliver_webhook', account_id: t.accountId },
      { kind: 'deploy', account_id: t.accountId },
      { kind: 'write_environment_secrets', account_id: t.accountId },
    ]);
    await db.deleteFrom('jobs').execute();
    await h.request('PUT', `/v1/environments/${t.envId}/secrets`, {
      token: t.token,
      body: { secrets: [{ key: 'AFTER', value: 'v' }] },
    });
    const after = await db
      .selectFrom('jobs')
      .select('account_id')
      .where('kind', '=', 'deliver_webhook')
      .execute();
    assert.deepEqual(after, [{ account_id: t.accountId }]);
  });
});

describe('restarts recorded with a type of their own', () => {
  test('are service updates after migration 0049, in the deployment and in the events that kept it', async () => {
    const serviceId = await newServiceId();
    const { db } = h.deps.store;
    const deploy = await h.request('POST', `/v1/environments/${t.envId}/services/${serviceId}/deploy`, {
      token: t.token,
      body: {},
    });
    assert.equal(deploy.status, 200, deploy.raw);
    const id = deploy.body.data.deployment_id;
    await sql`UPDATE deployments SET type = 'restart' WHERE id = ${id}`.execute(db);
    await sql`UPDATE events SET data = jsonb_set(data, '{type}', '"restart"') WHERE data->>'id' = ${id}`.execute(
      db,
    );
    await sql`DELETE FROM kysely_migration WHERE name = '0049-restarts-are-service-updates'`.execute(db);
    await migrateToLatest(db);
    const res = await h.request('GET', `/v1/deployments/${id}`, { token: t.token });
    assert.equal(res.status, 200, res.raw);
    assert.equal(res.body.data.deployment.type, 'service_update');
    const kept = await sql<{
      type: string;
    }>`SELECT data->>'type' AS type FROM events WHERE data->>'id' = ${id}`.execute(db);
    assert.ok(kept.rows.length > 0, 'the deployment has events');
    assert.deepEqual(new Set(kept.rows.map((r) => r.type)), new Set(['service_update']));
  });
});

import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { sql } from 'kysely';
import { openStore } from '../../src/store/database.ts';
import { TEST_DATABASE } from '../helpers/database.ts';
import { pollUntil } from '../helpers/poll.ts';
import { api, firstStartOf } from '../helpers/process.ts';
import { serverFixture } from '../helpers/server.ts';

/** Secret values are sealed before they reach storage, and never written to a response or a log line. */
const servers = serverFixture('sim');

const PLAIN = 'plain-needle-5f3b9c2e';
const SENSITIVE = 'sensitive-needle-8a1d7e44';

function filesUnder(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(entry.parentPath, entry.name);
    return entry.isDirectory() ? filesUnder(full) : entry.isFile() ? [full] : [];
  });
}

test('values cannot be read from the raw storage; sensitive values appear in no response and no log line', async () => {
  const server = await servers.serve({ BERTH_LOG_LEVEL: 'trace' });
  const db = servers.database;
  const { token, envId } = await firstStartOf(server);
  const responses: string[] = [];
  const record = (r: { body: unknown }) => {
    responses.push(JSON.stringify(r.body));
    return r;
  };

  const secrets = [
    { key: 'PLAIN', value: PLAIN },
    { key: 'TOKEN', value: SENSITIVE, is_sensitive: true },
  ];
  const created = record(
    await api(`${server.url}/v1/environments/${envId}/services`, token, 'POST', {
      name: 'Vault',
      source: 'docker_image',
      type: 'worker',
      replica_count: 1,
      cpu_count_min: 0.5,
      memory_mb_min: 128,
      docker_image: 'acme/vault',
      secrets,
      deploy_now: true,
    }),
  );
  const serviceUrl = `${server.url}/v1/environments/${envId}/services/${(created.body as { data: { service: { id: string } } }).data.service.id}`;
  record(await api(`${serviceUrl}/secrets`, token, 'PUT', { secrets }));
  record(await api(`${server.url}/v1/environments/${envId}/secrets`, token, 'PUT', { secrets }));
  const readBack = record(await api(`${serviceUrl}/secrets`, token));
  record(await api(`${server.url}/v1/environments/${envId}/secrets`, token));
  record(await api(`${server.url}/v1/audit-logs`, token));
  await pollUntil('the deployment to finish', async () => {
    const res = record(await api(serviceUrl, token));
    return (res.body as { data: { state: string } }).data.state === 'running' ? true : undefined;
  });
  assert.equal(await server.kill('SIGTERM'), 0);

  assert.ok(JSON.stringify(readBack.body).includes(PLAIN), 'a plain value is readable through the API');
  for (const text of responses) assert.ok(!text.includes(SENSITIVE), 'a response carried a sensitive value');
  const logs = server.stdout() + server.stderr();
  assert.ok(logs.length > 0, 'the server logged at trace level');
  assert.ok(!logs.includes(SENSITIVE), 'a log line carried a sensitive value');
  assert.ok(!logs.includes(PLAIN), 'a log line carried a secret value');

  // Raw storage: every byte of the embedded database's files, or every row of every table on Postgres.
  if (TEST_DATABASE === 'embedded') {
    const files = filesUnder(path.join(db.dataDir, 'pgdata'));
    assert.ok(files.length > 10);
    for (const file of files) {
      const bytes = fs.readFileSync(file);
      assert.ok(
        !bytes.includes(PLAIN) && !bytes.includes(SENSITIVE),
        `${file} holds a secret value in clear`,
      );
    }
  }
  const store = await openStore({ databaseUrl: db.databaseUrl, dataDir: db.dataDir });
  try {
    const tables = await sql<{
      tablename: string;
    }>`SELECT tablename FROM pg_tables WHERE schemaname = 'public'`.execute(store.db);
    assert.ok(tables.rows.some((t) => t.tablename === 'secrets'));
    for (const { tablename } of tables.rows) {
      const dump = await sql<{
        row: unknown;
      }>`SELECT to_jsonb(t) AS row FROM ${sql.table(tablename)} t`.execute(store.db);
      const text = JSON.stringify(dump.rows);
      assert.ok(
        !text.includes(PLAIN) && !text.includes(SENSITIVE),
        `table ${tablename} holds a secret value in clear`,
      );
    }
    const sealed = await store.db.selectFrom('secrets').select('value_sealed').execute();
    assert.equal(sealed.length, 4);
    for (const row of sealed) assert.match(row.value_sealed, /^v1:[0-9a-f]{12}:/);
  } finally {
    await store.close();
  }
});

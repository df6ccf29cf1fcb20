import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { sql } from 'kysely';
import { buildApp } from '../../src/api/app.ts';
import type { Worker } from '../../src/jobs/worker.ts';
import { ADMIN_TOKEN, type Harness, startHarness } from '../helpers/harness.ts';

/** /ready: the database answers, its migrations are current, the worker loop runs (docs/metrics.md). */
let h: Harness;
let worker: Worker;
let app: Awaited<ReturnType<typeof buildApp>>;
before(async () => {
  h = await startHarness();
  worker = await h.startWorker();
  // The app of a process that runs workers: /ready asks about them.
  app = await buildApp(h.deps, { adminToken: ADMIN_TOKEN, workerAlive: () => worker.alive() });
});
after(async () => {
  await app.close();
  await h.close();
});

async function ready(on = app) {
  const res = await on.inject({ method: 'GET', url: '/ready' });
  return { status: res.statusCode, body: res.json() };
}

test('ready: every check passes', async () => {
  assert.deepEqual(await ready(), {
    status: 200,
    body: { message: 'ready', checks: { database: 'ok', migrations: 'ok', worker: 'ok' } },
  });
});

test('a process that runs no workers is not asked about them', async () => {
  assert.deepEqual((await ready(h.app)).body.checks, {
    database: 'ok',
    migrations: 'ok',
    worker: 'not_run_here',
  });
  assert.equal((await ready(h.app)).status, 200);
});

test('a migration the database has not run: 503 naming it', async () => {
  const [last] = (
    await sql<{ name: string }>`SELECT name FROM kysely_migration ORDER BY name DESC LIMIT 1`.execute(
      h.deps.store.db,
    )
  ).rows;
  assert.ok(last);
  await sql`DELETE FROM kysely_migration WHERE name = ${last.name}`.execute(h.deps.store.db);
  try {
    const res = await ready();
    assert.equal(res.status, 503);
    assert.deepEqual(res.body.checks, { database: 'ok', migrations: 'failed', worker: 'ok' });
    assert.equal(res.body.message, `not ready: migrations not run: ${last.name}`);
  } finally {
    await sql`INSERT INTO kysely_migration (name, timestamp) VALUES (${last.name}, ${new Date().toISOString()})`.execute(
      h.deps.store.db,
    );
  }
  assert.equal((await ready()).status, 200);
});

test('a stopped worker loop: 503 while /health stays 200', async () => {
  await worker.stop();
  const res = await ready();
  assert.equal(res.status, 503);
  assert.deepEqual(res.body, {
    message: 'not ready: the worker loop is not running',
    checks: { database: 'ok', migrations: 'ok', worker: 'failed' },
  });
  assert.equal((await h.request('GET', '/health')).status, 200);
});

test('a database that is gone: 503 naming the database, and /health says unavailable', async () => {
  const second = await startHarness();
  try {
    await second.deps.store.close();
    const res = await ready(second.app);
    assert.equal(res.status, 503);
    assert.deepEqual(res.body, {
      message: 'not ready: the database does not answer; migrations unknown',
      checks: { database: 'failed', migrations: 'failed', worker: 'not_run_here' },
    });
    assert.equal((await second.request('GET', '/health')).status, 503);
  } finally {
    await second.close();
  }
});

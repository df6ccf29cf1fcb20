/**
 * The read cache of polled resources: served without a query until a change is announced, correct
 * across processes (on Postgres the change comes from a `berth worker` process; the embedded database
 * has one process, so its worker runs in this one), and dropped while the notification connection is
 * lost (Postgres: the embedded database's notifications need no connection).
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { sql } from 'kysely';
import pg from 'pg';
import { CHANGE_KINDS } from '../../src/store/notifications.ts';
import { TEST_DATABASE } from '../helpers/database.ts';
import { acceptedDeployment } from '../helpers/deployments.ts';
import { type Harness, startHarness, type Tenant } from '../helpers/harness.ts';
import { pollUntil } from '../helpers/poll.ts';
import { type BerthProcess, runBerth } from '../helpers/process.ts';

let h: Harness;
let t: Tenant;
const processes: BerthProcess[] = [];
before(async () => {
  h = await startHarness({ rateLimitPerMin: 100_000 });
  t = await h.tenant();
});
after(async () => {
  await Promise.all(processes.map((p) => p.kill()));
  await h.close();
});

/** The queries a GET ran, leaving out the token lookup and the Postgres rate-limit window. */
async function get(url: string) {
  h.queries.length = 0;
  const res = await h.request('GET', url, { token: t.token });
  assert.equal(res.status, 200, res.raw);
  const queries = h.queries.filter((q) => !q.includes('rate_limit_windows') && !q.includes('api_tokens'));
  return { res, queries };
}

/** Polls until a read of `url` is served from the cache (the notification connection may still be coming up). */
const cached = (url: string) =>
  pollUntil(`${url} to be served from the cache`, async () =>
    (await get(url)).queries.length === 0 ? true : undefined,
  );

const queuedDeployment = () => acceptedDeployment(h, t);

test('a poll is served from the cache, and a change made through the API shows at once', async () => {
  const { serviceId } = await queuedDeployment();
  const url = `/v1/environments/${t.envId}/services/${serviceId}`;
  await cached(url);
  const patched = await h.request('PATCH', url, { token: t.token, body: { replica_count: 4 } });
  assert.equal(patched.status, 200, patched.raw);
  const { res, queries } = await get(url);
  assert.ok(queries.length > 0, 'the change dropped the cached service');
  assert.equal(res.body.data.service.replica_count, 4);
});

test('a poll after a change committed by another process (a worker) reflects it', async () => {
  const { serviceId, deploymentId } = await queuedDeployment();
  const url = `/v1/deployments/${deploymentId}`;
  const serviceUrl = `/v1/environments/${t.envId}/services/${serviceId}`;
  await cached(url);
  await cached(serviceUrl);
  assert.equal((await get(url)).res.body.data.deployment.state, 'queued');

  if (TEST_DATABASE === 'postgres') {
    const worker = runBerth(['worker'], {
      BERTH_DATABASE_URL: h.deps.config.databaseUrl,
      BERTH_DATA_DIR: h.deps.config.dataDir,
      BERTH_SIM_STEP_MS: '20',
      BERTH_LOG_LEVEL: 'info',
    });
    processes.push(worker);
    await worker.waitForOutput(/worker started/);
  } else {
    await h.startWorker();
  }
  // Committed by the worker: read straight from the database, past the API.
  await pollUntil('the worker to commit success', async () => {
    const row = await h.deps.store.db
      .selectFrom('deployments')
      .select('state')
      .where('id', '=', deploymentId)
      .executeTakeFirst();
    return row?.state === 'success' ? true : undefined;
  });
  // Its notification drops the cached representations: the polls see it (they would not, if kept).
  await pollUntil('the poll to show success', async () =>
    (await get(url)).res.body.data.deployment.state === 'success' ? true : undefined,
  );
  await pollUntil('the service to show its deployment', async () => {
    const { res } = await get(serviceUrl);
    return res.body.data.service.latest_deployment?.state === 'success' ? true : undefined;
  });
  // A terminal deployment stays cached.
  await cached(url);
  // Stopped here: left running, it would finish the next test's deployments, and a terminal
  // deployment is kept through a lost connection (it never changes, but for that test's raw UPDATE).
  await Promise.all(processes.splice(0).map((p) => p.kill()));
});

test('a cached deployment is dropped when the notification connection dies, and cached again once it is back', {
  skip:
    TEST_DATABASE === 'embedded' &&
    'the embedded database notifies in process: there is no connection to lose',
}, async () => {
  const { deploymentId } = await queuedDeployment();
  const url = `/v1/deployments/${deploymentId}`;
  const done = await queuedDeployment();
  await h.deps.store.db
    .updateTable('deployments')
    .set({ state: 'failed' })
    .where('id', '=', done.deploymentId)
    .execute();
  const terminalUrl = `/v1/deployments/${done.deploymentId}`;
  await cached(url);
  await cached(terminalUrl);

  const killed = await sql<{ pid: number }>`
      SELECT pg_terminate_backend(pid) AS pid FROM pg_stat_activity
      WHERE datname = current_database() AND pid <> pg_backend_pid()
        AND query LIKE '%LISTEN berth_changes;%'`.execute(h.deps.store.db);
  // This process's listening connection (one, for every topic), and the worker process's.
  assert.ok(killed.rows.length >= 1, 'a connection listens');
  await pollUntil('the cached deployment to be dropped', async () =>
    (await get(url)).queries.length > 0 ? true : undefined,
  );
  assert.equal((await get(terminalUrl)).queries.length, 0, 'a terminal deployment is kept');

  // Back: cached again, and a change made meanwhile elsewhere is seen.
  await cached(url);
  const elsewhere = new pg.Client({ connectionString: h.deps.config.databaseUrl });
  await elsewhere.connect();
  await elsewhere.query(`UPDATE deployments SET note = 'changed elsewhere' WHERE id = $1`, [deploymentId]);
  await elsewhere.end();
  await pollUntil('the change to show', async () =>
    (await get(url)).res.body.data.deployment.note === 'changed elsewhere' ? true : undefined,
  );
});

test("the change tags the triggers send are the kinds the read cache's tags are built from", async () => {
  const triggers = await sql<{ args: string }>`
      SELECT encode(tgargs, 'escape') AS args FROM pg_trigger WHERE tgname LIKE '%_notify_change'`.execute(
    h.deps.store.db,
  );
  assert.ok(triggers.rows.length > 0);
  // Arguments are pairs: a tag's kind, then the column holding its id.
  const kinds = new Set(
    triggers.rows.flatMap(({ args }) =>
      args
        .split('\\000')
        .filter(Boolean)
        .filter((_, i) => i % 2 === 0),
    ),
  );
  assert.deepEqual([...kinds].sort(), [...CHANGE_KINDS].sort());
});

import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
import { sql } from 'kysely';
import { MAX_LOG_LINES } from '../../src/store/log-at-commit.ts';
import { appendDeploymentLog } from '../../src/store/repositories/deployment-logs.ts';
import { TEST_DATABASE } from '../helpers/database.ts';
import { type Harness, startHarness, type Tenant, VALID_SERVICE } from '../helpers/harness.ts';
import { pollUntil } from '../helpers/poll.ts';
import { openSse } from '../helpers/sse.ts';

/** A deployment's log and operations on the sim provider: written by the worker, read and followed. */
let h: Harness;
let t: Tenant;
let baseUrl: string;
let serviceUrl: string;
before(async () => {
  h = await startHarness({ providerEnv: { BERTH_SIM_STEP_MS: '150' } });
  await h.startWorker();
  t = await h.tenant();
  await h.app.listen({ port: 0, host: '127.0.0.1' });
  baseUrl = `http://127.0.0.1:${(h.app.server.address() as AddressInfo).port}`;
  const created = await h.request('POST', `/v1/environments/${t.envId}/services`, {
    token: t.token,
    body: { ...VALID_SERVICE.docker, replica_count: 2 },
  });
  assert.equal(created.status, 200, created.raw);
  serviceUrl = `/v1/environments/${t.envId}/services/${created.body.data.service.id}`;
});
after(() => h.close());

async function deploy(body: Record<string, unknown> = {}): Promise<string> {
  const res = await h.request('POST', `${serviceUrl}/deploy`, { token: t.token, body });
  assert.equal(res.status, 200, res.raw);
  return res.body.data.deployment_id;
}

const STEPS_OF_A_SUCCESS = ['accept', 'queue', 'source', 'pull', 'rollout', 'traffic', 'drain', 'outcome'];

test('following a deployment streams its log in order until it is terminal, then ends', async () => {
  const id = await deploy({ docker_image_tag: 'v1' });
  const stream = await openSse(`${baseUrl}/v1/deployments/${id}/logs?follow=true`, t.token);
  assert.equal(stream.status, 200);
  await stream.ended;
  const lines = stream.events.filter((e) => e.event === 'line');
  const end = stream.events.at(-1);
  assert.equal(end?.event, 'end');
  assert.equal(end?.data.deployment.state, 'success');
  assert.equal(stream.events.filter((e) => e.event === 'end').length, 1);
  const cursors = lines.map((e) => BigInt(e.id as string));
  assert.deepEqual(
    cursors,
    [...cursors].sort((a, b) => (a < b ? -1 : 1)),
    'ids increase',
  );
  assert.equal(new Set(cursors).size, cursors.length, 'no line twice');
  for (const e of lines) assert.equal(e.id, e.data.cursor);
  const steps = [...new Set(lines.map((e) => e.data.step))];
  assert.deepEqual(steps, STEPS_OF_A_SUCCESS);
  const text = lines.map((e) => e.data.line).join('\n');
  assert.match(text, /Deployment of v1 accepted/);
  assert.match(text, /Digest: sha256:[0-9a-f]{64}/);
  assert.match(text, /Replica 1 created/);
  assert.match(text, /Traffic moved to this deployment/);
  assert.match(lines.at(-1)?.data.line, /^Deployment succeeded$/);

  // The same log read as JSON, and read on from a cursor in the middle: exactly the rest.
  const all = await h.request('GET', `/v1/deployments/${id}/logs`, { token: t.token });
  assert.equal(all.status, 200, all.raw);
  assert.deepEqual(
    all.body.data.lines.map((l: { cursor: string }) => l.cursor),
    lines.map((e) => e.id),
  );
  assert.equal(all.body.data.deployment.state, 'success');
  const middle = lines[3]?.id as string;
  const rest = await h.request('GET', `/v1/deployments/${id}/logs?cursor=${middle}`, { token: t.token });
  assert.deepEqual(
    rest.body.data.lines.map((l: { cursor: string }) => l.cursor),
    lines.slice(4).map((e) => e.id),
  );
  assert.equal(rest.body.data.next_cursor, lines.at(-1)?.id);

  // An EventSource reconnecting sends Last-Event-ID: the stream resumes after it.
  const resumed = await openSse(`${baseUrl}/v1/deployments/${id}/logs?follow=true`, t.token, {
    'last-event-id': middle,
  });
  await resumed.ended;
  assert.deepEqual(
    resumed.events.filter((e) => e.event === 'line').map((e) => e.id),
    lines.slice(4).map((e) => e.id),
  );

  const ops = await h.request('GET', `/v1/deployments/${id}/operations`, { token: t.token });
  assert.equal(ops.status, 200, ops.raw);
  assert.deepEqual(
    ops.body.data.operations.map((o: { step: string }) => o.step),
    STEPS_OF_A_SUCCESS,
  );
  for (const op of ops.body.data.operations) {
    assert.equal(op.state, 'success', JSON.stringify(op));
    assert.ok(op.finished_at >= op.started_at);
    assert.ok(op.duration_ms >= 0);
  }
  // The timeline: each moment once, in the order it happened, with milliseconds.
  const timeline = ops.body.data.timeline as { mark: string; at: string; elapsed_ms: number }[];
  assert.deepEqual(
    timeline.map((m) => m.mark),
    ['accepted', 'claimed', 'image_resolved', 'routed', 'success'],
  );
  for (const [i, moment] of timeline.entries()) {
    assert.match(moment.at, /\.\d{3}Z$/);
    assert.equal(moment.elapsed_ms, Date.parse(moment.at) - Date.parse(timeline[0]?.at ?? ''));
    assert.ok(i === 0 || moment.at >= (timeline[i - 1]?.at ?? ''), `${moment.mark} is in order`);
  }
  // The get endpoint keeps op_ids and ops empty, as the spec says.
  const got = await h.request('GET', `/v1/deployments/${id}`, { token: t.token });
  assert.deepEqual(got.body.data.deployment.op_ids, []);
  assert.deepEqual(got.body.data.deployment.ops, {});
});

test('a deployment queued behind another says so; a failed one ends with its reason', async () => {
  const first = await deploy({ docker_image_tag: 'v2' });
  const second = await deploy({ docker_image_tag: 'fail-on-purpose' });
  const log = await pollUntil('the second deployment to end', async () => {
    const res = await h.request('GET', `/v1/deployments/${second}/logs`, { token: t.token });
    return ['success', 'failed'].includes(res.body.data.deployment.state) ? res.body.data : undefined;
  });
  const text = log.lines.map((l: { line: string }) => l.line);
  assert.match(text[1], new RegExp(`^Queued behind deployment ${first} \\((queued|in_progress)\\)$`));
  assert.match(text.at(-1), /^Deployment failed: simulated failure: the target fail-on-purpose/);
  const ops = await h.request('GET', `/v1/deployments/${second}/operations`, { token: t.token });
  const byStep = Object.fromEntries(
    ops.body.data.operations.map((o: { step: string; state: string }) => [o.step, o.state]),
  );
  assert.equal(byStep.pull, 'failed');
  assert.equal(byStep.outcome, 'failed');
  assert.equal(byStep.traffic, undefined, 'traffic never moved');
  assert.deepEqual(
    ops.body.data.timeline.map((m: { mark: string }) => m.mark),
    ['accepted', 'claimed', 'failed'],
  );
});

test('the log is bounded: the oldest lines are dropped and one marker line counts them', async () => {
  const id = await deploy({ docker_image_tag: 'v3' });
  await pollUntil('the deployment to end', async () => {
    const res = await h.request('GET', `/v1/deployments/${id}`, { token: t.token });
    return res.body.data.deployment.state === 'success' ? true : undefined;
  });
  const at = new Date();
  for (let batch = 0; batch < 3; batch++) {
    await h.deps.store.db.transaction().execute((trx) =>
      appendDeploymentLog(
        trx,
        id,
        Array.from({ length: 1000 }, (_, i) => ({ step: 'build' as const, line: `noise ${batch}-${i}`, at })),
      ),
    );
  }
  const res = await h.request('GET', `/v1/deployments/${id}/logs?limit=2000`, { token: t.token });
  const lines = res.body.data.lines;
  assert.equal(lines.length, MAX_LOG_LINES);
  const marker = lines[0];
  const dropped = marker.dropped;
  assert.ok(dropped > 1000, `dropped ${dropped}`);
  assert.match(marker.line, new RegExp(`^\\[${dropped} earlier lines dropped`));
  for (const line of lines.slice(1)) assert.equal(line.dropped, null);
  // The marker and the newest MAX_LOG_LINES lines: one more than a page holds.
  const more = await h.request('GET', `/v1/deployments/${id}/logs?cursor=${lines.at(-1).cursor}`, {
    token: t.token,
  });
  assert.deepEqual(
    more.body.data.lines.map((l: { line: string }) => l.line),
    ['noise 2-999'],
  );
});

test('a commit that writes several logs trims only the one past the bound', async () => {
  const ids = [await deploy({ docker_image_tag: 'v4' }), await deploy({ docker_image_tag: 'v5' })];
  await pollUntil('the deployments to end', async () => {
    const rows = await h.deps.store.db
      .selectFrom('deployments')
      .select('state')
      .where('id', 'in', ids)
      .where('state', 'in', ['success', 'failed'])
      .execute();
    return rows.length === ids.length ? true : undefined;
  });
  const [long, short] = ids as [string, string];
  const at = new Date();
  h.queries.length = 0;
  await h.deps.store.db.transaction().execute(async (trx) => {
    await appendDeploymentLog(
      trx,
      long,
      Array.from({ length: MAX_LOG_LINES + 1 }, (_, i) => ({
        step: 'build' as const,
        line: `noise ${i}`,
        at,
      })),
    );
    await appendDeploymentLog(trx, short, [{ step: 'build', line: 'one more', at }]);
  });
  const trims = h.queries.filter((q) => q.includes('earlier lines dropped'));
  assert.equal(trims.length, 1, 'one trim, for the log past the bound');
  const kept = (id: string) =>
    h.deps.store.db
      .selectFrom('deployment_logs')
      .select(['line', 'dropped'])
      .where('deployment_id', '=', id)
      .orderBy('seq')
      .execute();
  const longLines = await kept(long);
  assert.equal(longLines.length, MAX_LOG_LINES + 1);
  assert.ok((longLines[0]?.dropped ?? 0) > 0, JSON.stringify(longLines[0]));
  const shortLines = await kept(short);
  assert.ok(shortLines.every((l) => l.dropped === null));
  assert.equal(shortLines.at(-1)?.line, 'one more');
});

/**
 * A deployment that stays queued (no worker in this harness), followed over HTTP once its first lines
 * arrived: nothing is logged after that unless the test does it.
 */
async function followQueued(quiet: Harness) {
  const tenant = await quiet.tenant();
  await quiet.app.listen({ port: 0, host: '127.0.0.1' });
  const url = `http://127.0.0.1:${(quiet.app.server.address() as AddressInfo).port}`;
  const services = `/v1/environments/${tenant.envId}/services`;
  const created = await quiet.request('POST', services, { token: tenant.token, body: VALID_SERVICE.docker });
  assert.equal(created.status, 200, created.raw);
  const deployed = await quiet.request('POST', `${services}/${created.body.data.service.id}/deploy`, {
    token: tenant.token,
    body: {},
  });
  assert.equal(deployed.status, 200, deployed.raw);
  const id = deployed.body.data.deployment_id as string;
  const stream = await openSse(`${url}/v1/deployments/${id}/logs?follow=true`, tenant.token);
  await stream.until('the lines so far', (events) => events.some((e) => e.event === 'line'));
  return { id, stream, tenant };
}

// In both: the fallback read comes FOLLOW_POLL_MS (5 s) after the last wake, well after the deadline.
test("a follower's end comes with the deployment's own change, not with the next fallback read", async () => {
  const quiet = await startHarness();
  try {
    const { id, stream } = await followQueued(quiet);
    await quiet.deps.store.db
      .updateTable('deployments')
      .set({ state: 'failed', failure_reason: 'ended by the test' })
      .where('id', '=', id)
      .execute();
    const events = await stream.until('the end event', (seen) => seen.some((e) => e.event === 'end'), 3000);
    assert.equal(events.find((e) => e.event === 'end')?.data.deployment.state, 'failed');
    await stream.ended;
  } finally {
    await quiet.close();
  }
});

test('a line reaches a follower when it commits, not with the next fallback read', async () => {
  const quiet = await startHarness();
  try {
    const { id, stream } = await followQueued(quiet);
    await quiet.deps.store.db
      .transaction()
      .execute((trx) =>
        appendDeploymentLog(trx, id, [{ step: 'queue', line: 'appended by the test', at: new Date() }]),
      );
    await stream.until(
      'the appended line',
      (seen) =>
        seen.some((e) => e.event === 'line' && JSON.stringify(e.data).includes('appended by the test')),
      3000,
    );
    stream.close();
  } finally {
    await quiet.close();
  }
});

test("one transaction's writes to a deployment's log are written together: a step keeps its first start and its last state, a moment its first time", async () => {
  const quiet = await startHarness();
  try {
    const { id, stream } = await followQueued(quiet);
    stream.close();
    const { db } = quiet.deps.store;
    const first = new Date('2030-01-01T00:00:01.000Z');
    const then = new Date('2030-01-01T00:00:02.000Z');
    await db.transaction().execute(async (trx) => {
      await appendDeploymentLog(
        trx,
        id,
        [{ step: 'build', line: 'building', at: first }],
        [{ step: 'build', state: 'running', startedAt: first, finishedAt: null }],
        [{ mark: 'claimed', at: first }],
      );
      await appendDeploymentLog(
        trx,
        id,
        [{ step: 'build', line: 'built', at: then }],
        [{ step: 'build', state: 'success', startedAt: then, finishedAt: then }],
        [{ mark: 'claimed', at: then }],
      );
    });
    const lines = await db
      .selectFrom('deployment_logs')
      .select('line')
      .where('deployment_id', '=', id)
      .where('step', '=', 'build')
      .orderBy('seq')
      .execute();
    assert.deepEqual(
      lines.map((l) => l.line),
      ['building', 'built'],
    );
    const build = await db
      .selectFrom('deployment_operations')
      .select(['state', 'started_at', 'finished_at'])
      .where('deployment_id', '=', id)
      .where('step', '=', 'build')
      .executeTakeFirstOrThrow();
    assert.deepEqual(build, { state: 'success', started_at: first, finished_at: then });
    const claimed = await db
      .selectFrom('deployment_timeline')
      .select('at')
      .where('deployment_id', '=', id)
      .where('mark', '=', 'claimed')
      .execute();
    assert.deepEqual(claimed, [{ at: first }]);
  } finally {
    await quiet.close();
  }
});

test("a commit's log statement takes the log's lock before its events' statement takes the account's: a log write waiting on the account holds its deployment's lock", {
  skip: TEST_DATABASE !== 'postgres' && 'one connection embedded: nothing waits',
}, async () => {
  const quiet = await startHarness();
  let release = () => {};
  const released = new Promise<void>((resolve) => {
    release = resolve;
  });
  try {
    const { id, stream, tenant } = await followQueued(quiet);
    const { db } = quiet.deps.store;
    let holding = () => {};
    const held = new Promise<void>((resolve) => {
      holding = resolve;
    });
    const holder = db.transaction().execute(async (trx) => {
      await sql`SELECT pg_advisory_xact_lock(1702, hashtext(${tenant.accountId}))`.execute(trx);
      holding();
      await released;
    });
    await held;
    // The cancel's commit writes its events (the account's lock) and its log's last lines.
    const cancel = quiet.request('POST', `/v1/deployments/${id}/cancel`, { token: tenant.token, body: {} });
    const waiting = await pollUntil('the cancel to wait on the account', async () => {
      const { rows } = await sql<{ logLocked: boolean }>`
          SELECT EXISTS (SELECT 1 FROM pg_locks l WHERE l.pid = w.pid AND l.locktype = 'advisory'
            AND l.objsubid = 1 AND l.granted AND l.objid::bigint = hashtext(${id})::bigint & 4294967295) AS "logLocked"
          FROM pg_locks w WHERE w.locktype = 'advisory' AND w.objsubid = 2 AND NOT w.granted
            AND w.database = (SELECT oid FROM pg_database WHERE datname = current_database())`.execute(db);
      return rows[0];
    });
    release();
    await holder;
    const cancelled = await cancel;
    assert.equal(waiting.logLocked, true, "the deployment's lock is held while the account's is awaited");
    assert.equal(cancelled.status, 200, cancelled.raw);
    await stream.until('the cancel line', (seen) =>
      seen.some((e) => e.event === 'line' && e.data.line === 'Deployment cancelled before it started'),
    );
    stream.close();
  } finally {
    release();
    await quiet.close();
  }
});

test('a job whose run_command exits non-zero fails its deployment with the exit code, as docker and swarm report it', async () => {
  const created = await h.request('POST', `/v1/environments/${t.envId}/services`, {
    token: t.token,
    body: {
      ...VALID_SERVICE.docker,
      name: 'Failing Job',
      type: 'job',
      run_command: 'echo migrating; exit 3',
    },
  });
  assert.equal(created.status, 200, created.raw);
  const jobUrl = `/v1/environments/${t.envId}/services/${created.body.data.service.id}`;
  const res = await h.request('POST', `${jobUrl}/deploy`, { token: t.token, body: {} });
  assert.equal(res.status, 200, res.raw);
  const deployment = await pollUntil('the job deployment to end', async () => {
    const got = await h.request('GET', `/v1/deployments/${res.body.data.deployment_id}`, { token: t.token });
    const { state } = got.body.data.deployment;
    return state === 'success' || state === 'failed' ? got.body.data.deployment : undefined;
  });
  assert.equal(deployment.state, 'failed');
  assert.equal(deployment.failure_reason, 'the job exited with code 3');
  const observed = await pollUntil('the job to be observed as failed', async () => {
    const got = await h.request('GET', jobUrl, { token: t.token });
    return got.body.data.run_status === 'failed' ? got.body.data : undefined;
  });
  assert.equal(observed.run_status, 'failed');
});

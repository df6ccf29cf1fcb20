import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { createTestDatabase, type TestDatabase } from '../helpers/database.ts';
import { buildBaseImage, freePort, removeEnvironment, requireDocker } from '../helpers/docker.ts';
import { pollUntil } from '../helpers/poll.ts';
import { api, type BerthProcess, deploymentEnd, firstStartOf, startBerth } from '../helpers/process.ts';
import { openSse } from '../helpers/sse.ts';

/** What a user sees of real containers: their output (service logs). */
let db: TestDatabase;
let berth: BerthProcess & { url: string };
let token: string;
let envUrl: string;
let envId: string;

before(async () => {
  await requireDocker();
  db = await createTestDatabase();
  await buildBaseImage();
  berth = await startBerth({
    BERTH_DATA_DIR: db.dataDir,
    BERTH_DATABASE_URL: db.databaseUrl ?? '',
    BERTH_PROVIDER: 'docker',
    BERTH_INGRESS_PORT: String(await freePort()),
  });
  ({ token, envId, envUrl } = await firstStartOf(berth));
});
after(async () => {
  await berth?.kill('SIGTERM');
  if (envId) await removeEnvironment(envId);
  await db?.drop();
});

const BUSYBOX = {
  source: 'docker_image',
  docker_image: 'berth-test/busybox',
  replica_count: 1,
  cpu_count_min: 0.25,
  memory_mb_min: 32,
};

const SECRET = 'tr0ub4dor-and-3';

async function create(body: Record<string, unknown>) {
  const res = await api(`${envUrl}/services`, token, 'POST', { ...BUSYBOX, ...body });
  assert.equal(res.status, 200, JSON.stringify(res.body));
  return res.body.data.service as { id: string };
}

async function deployAndWait(serviceId: string, body: Record<string, unknown> = {}) {
  const res = await api(`${envUrl}/services/${serviceId}/deploy`, token, 'POST', body);
  assert.equal(res.status, 200, JSON.stringify(res.body));
  return deploymentEnd(berth.url, token, res.body.data.deployment_id, 120_000);
}

test('service logs: what the container printed, secrets masked, and with follow a line printed after the call', async () => {
  const worker = await create({
    name: 'Chatty Worker',
    type: 'worker',
    secrets: [{ key: 'API_KEY', value: SECRET }],
    run_command:
      'i=0; while true; do i=$((i+1)); echo "tick $i key=$API_KEY"; echo "warn $i" >&2; sleep 1; done',
  });
  const ok = await deployAndWait(worker.id);
  assert.equal(ok.state, 'success', ok.failure_reason);
  const logsUrl = `${envUrl}/services/${worker.id}/logs`;

  const lines = await pollUntil('two ticks', async () => {
    const res = await api(`${logsUrl}?tail=50`, token);
    assert.equal(res.status, 200, JSON.stringify(res.body));
    const ticks = res.body.data.lines.filter((l: { line: string }) => l.line.startsWith('tick'));
    return ticks.length >= 2 ? res.body.data.lines : undefined;
  });
  const tick = lines.find((l: { line: string }) => l.line.startsWith('tick 1 '));
  assert.equal(tick.line, 'tick 1 key=[redacted]');
  assert.equal(tick.stream, 'stdout');
  assert.match(tick.replica, /^berth-[a-z0-9-]+-0$/, 'the container that printed it');
  assert.ok(
    lines.some((l: { stream: string; line: string }) => l.stream === 'stderr' && /^warn \d+$/.test(l.line)),
  );
  assert.equal(JSON.stringify(lines).includes(SECRET), false, 'no secret value in a log line');
  const times = lines.map((l: { time: string }) => l.time);
  assert.deepEqual([...times].sort(), times);

  const tail = await api(`${logsUrl}?tail=1`, token);
  assert.equal(tail.body.data.lines.length, 1);

  const called = new Date().toISOString();
  const stream = await openSse(`${logsUrl}?follow=true&tail=1`, token);
  try {
    const events = await stream.until('a tick printed after the call', (events) =>
      events.some((e) => e.event === 'line' && e.data.line.startsWith('tick') && e.data.time > called),
    );
    assert.equal(JSON.stringify(events).includes(SECRET), false);
    const seen = events.map((e) => `${e.data.time} ${e.data.stream} ${e.data.line}`);
    assert.equal(new Set(seen).size, seen.length, 'no line twice');
  } finally {
    stream.close();
  }
});

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { TEST_DATABASE } from '../helpers/database.ts';
import { api, type BerthProcess, firstStartOf, listening, runBerth } from '../helpers/process.ts';
import { serverFixture } from '../helpers/server.ts';
import { openSse, type SseEvent } from '../helpers/sse.ts';

/**
 * GET /v1/events across processes. On Postgres the API process runs no workers (`serve --no-workers`):
 * a separate `berth worker` process carries the deployment out, and its commits reach the API process's
 * streams through LISTEN/NOTIFY. On the embedded database `berth serve` does both. A client that drops
 * in the middle and reconnects with Last-Event-ID gets exactly what an unbroken client got.
 */
const servers = serverFixture('sim', {
  // Slow enough steps that the client can drop between two transitions.
  BERTH_SIM_STEP_MS: '400',
});

const ofDeployment = (events: SseEvent[], id: string) =>
  events.filter((e) => e.event?.startsWith('deployment.') && e.data.data.id === id);

test(`a deployment run by ${TEST_DATABASE === 'postgres' ? 'a separate worker process' : 'the server'} streams every transition in order; a reconnect loses and repeats nothing`, async () => {
  const postgres = TEST_DATABASE === 'postgres';
  const server = runBerth(postgres ? ['serve', '--no-workers'] : ['serve'], {
    ...servers.env(),
    BERTH_PORT: '0',
  });
  const processes: BerthProcess[] = [server];
  try {
    const { url } = await listening(server);
    if (postgres) {
      const worker = runBerth(['worker', '--concurrency', '2'], {
        ...servers.env(),
        BERTH_LOG_LEVEL: 'info',
      });
      processes.push(worker);
      await worker.waitForOutput(/worker started/);
    }
    const { token, envId } = await firstStartOf(Object.assign(server, { url }));
    const unbroken = await openSse(`${url}/v1/events`, token);
    const first = await openSse(`${url}/v1/events`, token);
    const created = await api(`${url}/v1/environments/${envId}/services`, token, 'POST', {
      name: 'Events',
      source: 'docker_image',
      type: 'worker',
      replica_count: 1,
      cpu_count_min: 0.5,
      memory_mb_min: 128,
      docker_image: 'acme/events',
    });
    assert.equal(created.status, 200);
    const serviceId = created.body.data.service.id;
    const deployed = await api(
      `${url}/v1/environments/${envId}/services/${serviceId}/deploy`,
      token,
      'POST',
      {
        docker_image_tag: 'v1',
      },
    );
    assert.equal(deployed.status, 200);
    const deploymentId = deployed.body.data.deployment_id as string;

    // The first client drops once the deployment is in progress...
    await first.until('the deployment to start', (events) =>
      ofDeployment(events, deploymentId).some((e) => e.data.data.state === 'in_progress'),
    );
    first.close();
    // What the client had read when it dropped (a frame still in flight is not read).
    const firstSeen = [...first.events];
    const lastSeen = firstSeen.at(-1)?.id as string;
    await unbroken.until('the deployment to succeed', (events) =>
      ofDeployment(events, deploymentId).some((e) => e.data.data.state === 'success'),
    );
    // ...and comes back after the deployment ended.
    const second = await openSse(`${url}/v1/events`, token, { 'last-event-id': lastSeen });
    await second.until('the events the unbroken client got', (events) =>
      events.some((e) => e.id === unbroken.events.at(-1)?.id),
    );
    unbroken.close();
    second.close();

    assert.deepEqual(
      ofDeployment(unbroken.events, deploymentId).map((e) => [e.event, e.data.data.state]),
      [
        ['deployment.created', 'queued'],
        ['deployment.updated', 'in_progress'],
        ['deployment.updated', 'success'],
      ],
    );
    const ids = unbroken.events.map((e) => e.id);
    assert.equal(new Set(ids).size, ids.length, 'no event twice');
    assert.deepEqual(
      [...firstSeen, ...second.events].map((e) => e.id),
      ids,
      'the reconnected client got exactly the same events',
    );
    assert.ok(second.events.length > 0 && firstSeen.length > 0);
  } finally {
    for (const p of processes.reverse()) await p.kill('SIGTERM');
  }
});

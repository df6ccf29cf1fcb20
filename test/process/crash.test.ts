import assert from 'node:assert/strict';
import { test } from 'node:test';
import { simTables } from '../../src/providers/sim/tables.ts';
import { openStore } from '../../src/store/database.ts';
import { assertNoDeploymentWithoutJobIn } from '../helpers/fencing.ts';
import { pollUntil } from '../helpers/poll.ts';
import { api } from '../helpers/process.ts';
import { KILLED_SERVER, serverFixture } from '../helpers/server.ts';

/**
 * A server SIGKILLed while deployments are in progress: started again on the same database, every
 * deployment still ends, each exactly once (one finished provider call per deployment).
 */
const server = serverFixture('sim', { ...KILLED_SERVER, BERTH_SIM_STEP_MS: '300' });

/**
 * The first server's steps: a deploy call it begins lasts 2 x 4 s, so the kill, sent as soon as a call
 * is seen begun, lands inside it however loaded the machine (with 300 ms steps the call could end first).
 */
const FIRST_SERVER_STEP_MS = '4000';

test('SIGKILL during deployments: after a restart every deployment reaches a terminal state exactly once', async () => {
  const { berth: first, token, envId } = await server.start({ BERTH_SIM_STEP_MS: FIRST_SERVER_STEP_MS });

  const deploymentIds: string[] = [];
  for (let s = 0; s < 3; s++) {
    const created = await api(`${first.url}/v1/environments/${envId}/services`, token, 'POST', {
      name: `Crash Test ${'abc'[s]}`,
      source: 'docker_image',
      type: 'worker',
      replica_count: 1,
      cpu_count_min: 0.5,
      memory_mb_min: 128,
      docker_image: 'acme/crash',
    });
    const serviceId = created.body.data.service.id;
    for (let d = 0; d < 3; d++) {
      const res = await api(
        `${first.url}/v1/environments/${envId}/services/${serviceId}/deploy`,
        token,
        'POST',
        {
          docker_image_tag: `v${d}`,
        },
      );
      deploymentIds.push(res.body.data.deployment_id);
    }
  }

  const stateOf = async (url: string, id: string) =>
    (await api(`${url}/v1/deployments/${id}`, token)).body.data.deployment.state;
  // The sim writes its pull lines inside the provider call, after recording the call: a deployment
  // merely in_progress may not have reached its call yet (the embedded database, held by the server,
  // cannot be read meanwhile).
  await pollUntil('a provider call to have begun', async () => {
    for (const id of deploymentIds) {
      const log = await api(`${first.url}/v1/deployments/${id}/logs`, token);
      if (log.body.data.lines.some((l: { step: string }) => l.step === 'pull')) return true;
    }
    return undefined;
  });
  assert.equal(await first.kill('SIGKILL'), 'SIGKILL');
  await assertNoDeploymentWithoutJobIn(server.database);

  const second = await server.serve();
  for (const id of deploymentIds) {
    const state = await pollUntil(
      `deployment ${id} to end`,
      async () => {
        const s = await stateOf(second.url, id);
        return s === 'success' || s === 'failed' ? s : undefined;
      },
      { timeoutMs: 60_000 },
    );
    assert.equal(state, 'success');
  }
  assert.equal(await second.kill('SIGTERM'), 0);

  const store = await openStore({
    databaseUrl: server.database.databaseUrl,
    dataDir: server.database.dataDir,
  });
  try {
    const calls = await simTables(store.db)
      .selectFrom('sim_calls')
      .select(['subject_id', 'outcome', 'finished_at'])
      .where('operation', '=', 'deploy')
      .execute();
    for (const id of deploymentIds) {
      // A call cut short because its worker lost the job (a late lease renewal on a loaded machine) is
      // recorded `aborted: ...` and changed nothing; what counts is that exactly one call completed.
      const completed = calls.filter(
        (c) => c.subject_id === id && c.finished_at !== null && !c.outcome?.startsWith('aborted: '),
      );
      const outcomes = calls.filter((c) => c.subject_id === id).map((c) => c.outcome);
      assert.equal(completed.length, 1, `deployment ${id}: calls ${JSON.stringify(outcomes)}`);
      assert.equal(completed[0]?.outcome, 'success');
    }
    const interrupted = calls.filter((c) => c.finished_at === null);
    assert.ok(interrupted.length >= 1, 'the kill interrupted at least one provider call');
  } finally {
    await store.close();
  }
});

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { startObserver } from '../../src/jobs/observer.ts';
import { simTables } from '../../src/providers/sim/tables.ts';
import { observedServices, recordObservation } from '../../src/store/repositories/observations.ts';
import { type Harness, startHarness, type Tenant, VALID_SERVICE } from '../helpers/harness.ts';
import { pollUntil } from '../helpers/poll.ts';

/** What runs is observed after each deployment and again by the observer: GETs read the written-back state. */
let h: Harness;
let t: Tenant;
before(async () => {
  h = await startHarness();
  t = await h.tenant();
});
after(() => h.close());

test('drift in the runtime (replicas stopped) reaches GET through the observer, not by asking the provider', async () => {
  await h.startWorker();
  const base = `/v1/environments/${t.envId}/services`;
  const created = await h.request('POST', base, { token: t.token, body: VALID_SERVICE.docker });
  const id = created.body.data.service.id as string;
  const deployed = await h.request('POST', `${base}/${id}/deploy`, { token: t.token, body: {} });
  await pollUntil('the deployment to succeed', async () => {
    const d = (
      await h.request('GET', `/v1/deployments/${deployed.body.data.deployment_id}`, { token: t.token })
    ).body.data.deployment;
    return d.state === 'success' ? true : undefined;
  });
  const live = (await h.request('GET', `${base}/${id}`, { token: t.token })).body.data;
  assert.equal(live.run_status, 'running', 'written back by the deploy job');
  assert.ok(live.ready_count > 0);

  // The simulated cloud loses the replicas behind Berth's back.
  await simTables(h.deps.store.db)
    .updateTable('sim_workloads')
    .set({ run_status: 'stopped' })
    .where('service_id', '=', id)
    .execute();
  const stale = (await h.request('GET', `${base}/${id}`, { token: t.token })).body.data;
  assert.equal(stale.run_status, 'running', 'a GET does not ask the provider');

  const observer = startObserver(h.deps, 100);
  try {
    await pollUntil('the observer to write the drift back', async () => {
      const data = (await h.request('GET', `${base}/${id}`, { token: t.token })).body.data;
      return data.run_status === 'stopped' && data.ready_count === 0 ? true : undefined;
    });
  } finally {
    await observer.stop();
  }
});

test("a round skips a service observed since its interval's last nine tenths began: other processes' observers and deployments count", async () => {
  const created = await h.request('POST', `/v1/environments/${t.envId}/services`, {
    token: t.token,
    body: { ...VALID_SERVICE.docker, name: 'observed lately' },
  });
  const id = created.body.data.service.id as string;
  const at = new Date();
  await recordObservation(h.deps.store.db, id, { run_status: 'running', ready_count: 1 }, at);
  const ids = async (before: Date) => (await observedServices(h.deps.store.db, before)).map((s) => s.id);
  assert.ok(!(await ids(at)).includes(id), 'observed as the round began: skipped');
  assert.ok((await ids(new Date(at.getTime() + 1))).includes(id), 'observed before: looked at again');
});

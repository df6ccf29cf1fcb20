import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { startWorker } from '../../src/runtime.ts';
import { type Harness, startHarness, type Tenant, VALID_SERVICE } from '../helpers/harness.ts';
import { pollUntil } from '../helpers/poll.ts';

/** A job committed by the API wakes an idle worker through NOTIFY, without waiting for its poll. */
let h: Harness;
let t: Tenant;
before(async () => {
  h = await startHarness();
  t = await h.tenant();
});
after(() => h.close());

test('an idle worker whose poll is an hour away still runs a new deployment at once', async (ctx) => {
  const worker = startWorker(h.deps, { concurrency: 2, pollMs: 3_600_000 });
  await worker.start();
  ctx.after(() => worker.stop());
  // Let the worker drain what setup queued and fall asleep on its (hour-long) poll.
  await pollUntil('the queue to drain', async () => {
    const left = await h.deps.store.db.selectFrom('jobs').select('seq').execute();
    return left.length === 0 ? true : undefined;
  });

  const created = await h.request('POST', `/v1/environments/${t.envId}/services`, {
    token: t.token,
    body: { ...VALID_SERVICE.docker, deploy_now: true },
  });
  assert.equal(created.status, 200);
  const state = await pollUntil(
    'the deployment to run',
    async () => {
      const res = await h.request(
        'GET',
        `/v1/environments/${t.envId}/services/${created.body.data.service.id}`,
        {
          token: t.token,
        },
      );
      return res.body.data.state === 'running' ? res.body.data.state : undefined;
    },
    { timeoutMs: 15_000 },
  );
  assert.equal(state, 'running');
});

import assert from 'node:assert/strict';
import { before, test } from 'node:test';
import { userCli } from '../helpers/cli.ts';
import { api, type BerthProcess } from '../helpers/process.ts';
import { serverFixture } from '../helpers/server.ts';

/**
 * `berth rollback`, `berth restart` and `berth deployments cancel` as a user runs them: the real bin
 * against a real `berth serve` (sim), with BERTH_URL and BERTH_TOKEN, output piped. Simulated steps of
 * 1.5 s keep a deployment in progress long enough to cancel it, even on a loaded machine.
 */
const servers = serverFixture('sim', { BERTH_SIM_STEP_MS: '1500' });
let server: BerthProcess & { url: string };
let token: string;
let envUrl: string;
before(async () => {
  ({ berth: server, token, envUrl } = await servers.start());
});

const { berth, json } = userCli(() => ({ url: server.url, token }));

const SERVICE = 'steady web';

test('restart and rollback with nothing deployed are conflicts (exit 6) that say why', async () => {
  const created = await api(`${envUrl}/services`, token, 'POST', {
    name: SERVICE,
    source: 'docker_image',
    type: 'web',
    port: 8080,
    replica_count: 1,
    cpu_count_min: 0.5,
    memory_mb_min: 256,
    docker_image: 'acme/hello',
  });
  assert.equal(created.status, 200, JSON.stringify(created.body));
  const restart = await berth(['restart', SERVICE]);
  assert.equal(restart.code, 6, restart.err);
  assert.match(restart.err, /^berth: conflict: .*no successful deployment to restart/m);
  const rollback = await berth(['rollback', SERVICE]);
  assert.equal(rollback.code, 6, rollback.err);
  assert.match(rollback.err, /^berth: conflict: .*no earlier successful deployment/m);
});

test('rollback --wait deploys the deployment before the serving one again (type restore); --to names another', async () => {
  const first = await json(['deploy', SERVICE, '--tag', 'v1', '--wait']);
  const second = await json(['deploy', SERVICE, '--tag', 'v2', '--wait']);
  assert.equal(second.deployment.state, 'success');

  const back = await berth(['rollback', SERVICE, '--note', 'v2 is broken', '--wait']);
  assert.equal(back.code, 0, back.err);
  assert.match(back.err, /^rolling back steady web: deployment [0-9a-f-]{36}$/m);
  assert.match(back.err, /^ {2}outcome: Deployment succeeded\nsuccess \(\d+s\)$/m);
  assert.match(back.out, /^docker_image_tag\tv1$/m);
  assert.match(back.out, /^note\tv2 is broken$/m);
  const [rolledBack] = (await json(['deployments', 'ls', SERVICE])).deployments;
  assert.equal(rolledBack.type, 'restore');
  assert.equal(rolledBack.docker_image_tag, 'v1');

  const forward = await json(['rollback', SERVICE, '--to', second.deployment.id, '--wait']);
  assert.equal(forward.deployment.docker_image_tag, 'v2');
  assert.equal(forward.deployment.state, 'success');
  assert.notEqual(forward.deployment.id, first.deployment.id);

  const unknown = await berth([
    'rollback',
    SERVICE,
    '--to',
    first.deployment.id.replace(/^.{8}/, '00000000'),
  ]);
  assert.equal(unknown.code, 5, unknown.err);
  assert.match(unknown.err, /deployment_id: .*deployment of this service/);
});

test('restart runs the serving version again (type service_update); without --wait it prints the deployment id', async () => {
  const restarted = await berth(['restart', SERVICE, '--note', 'flush caches']);
  assert.equal(restarted.code, 0, restarted.err);
  assert.match(restarted.err, /^restarting steady web: deployment [0-9a-f-]{36}$/m);
  const id = /^deployment_id\t([0-9a-f-]{36})$/m.exec(restarted.out)?.[1];
  assert.ok(id, restarted.out);
  const waited = await berth(['deployments', 'wait', id]);
  assert.equal(waited.code, 0, waited.err);
  const { deployment } = await json(['deployments', 'get', id]);
  assert.deepEqual(
    [deployment.type, deployment.docker_image_tag, deployment.note],
    ['service_update', 'v2', 'flush caches'],
  );
});

test('deployments cancel stops a deployment on its way: it ends failed, cancelled; a second cancel is a conflict', async () => {
  const started = await json(['deploy', SERVICE, '--tag', 'v3']);
  const cancelled = await berth(['deployments', 'cancel', started.deployment_id]);
  assert.equal(cancelled.code, 0, cancelled.err);
  assert.match(cancelled.err, new RegExp(`^cancelled deployment ${started.deployment_id}$`, 'm'));
  assert.match(cancelled.out, new RegExp(`^id\\t${started.deployment_id}$`, 'm'));
  const waited = await berth(['deployments', 'wait', started.deployment_id]);
  assert.equal(waited.code, 7, waited.err);
  assert.match(waited.err, /failed: cancelled/);
  const again = await berth(['deployments', 'cancel', started.deployment_id]);
  assert.equal(again.code, 6, again.err);
  assert.match(again.err, /nothing to cancel/);
  // The version before keeps serving: the service is running, not deploy_failed.
  const { service } = await json(['services', 'get', SERVICE]);
  assert.equal(service.state, 'running');
});

import assert from 'node:assert/strict';
import { before, test } from 'node:test';
import { BASE_IMAGE, buildImage, containersOfService, viaIngress } from '../helpers/docker.ts';
import { pollUntil } from '../helpers/poll.ts';
import { api, deploymentEnd } from '../helpers/process.ts';
import { serverFixture } from '../helpers/server.ts';

/**
 * A rollout succeeds once the new version serves; the old replicas drain afterwards, all at once, and a
 * drain cut short by a crash is finished when Berth starts again. The replicas here ignore SIGTERM, so
 * each takes the full ten seconds of a graceful stop.
 */
const server = serverFixture('docker');
const IMAGE = 'berth-test/stubborn';

before(async () => {
  for (const version of ['v1', 'v2']) {
    await buildImage(
      `${IMAGE}:${version}`,
      `FROM ${BASE_IMAGE}\nCMD ["/bin/sh", "-c", "trap '' TERM; mkdir -p /www && echo ${version} > /www/index.html && httpd -f -p 8080 -h /www & wait"]\n`,
    );
  }
});

test('the deployment succeeds when the new version serves; old replicas drain afterwards, in parallel, even across a crash', async () => {
  const { ingressPort } = server;
  let berth = await server.serve();
  try {
    const started = await server.firstStart(berth);
    const created = await api(`${started.envUrl}/services`, started.token, 'POST', {
      name: 'Stubborn',
      source: 'docker_image',
      docker_image: IMAGE,
      type: 'web',
      port: 8080,
      replica_count: 2,
      cpu_count_min: 0.25,
      memory_mb_min: 32,
    });
    assert.equal(created.status, 200, JSON.stringify(created.body));
    const service = created.body.data.service as { id: string; subdomain: string };
    const host = `${service.subdomain}.localhost`;
    const deploy = async (tag: string) => {
      const url = `${started.envUrl}/services/${service.id}/deploy`;
      const res = await api(url, started.token, 'POST', { docker_image_tag: tag });
      const end = await deploymentEnd(berth.url, started.token, res.body.data.deployment_id, 120_000);
      assert.equal(end.state, 'success', end.failure_reason);
      return end.id as string;
    };
    const containersOf = async (deploymentId: string) =>
      (await containersOfService(service.id)).filter((c) => c.Labels['berth.deployment'] === deploymentId);

    const first = await deploy('v1');
    assert.equal((await containersOf(first)).length, 2);

    await deploy('v2');
    const succeededAt = Date.now();
    assert.equal(
      (await containersOf(first)).filter((c) => c.State === 'running').length,
      2,
      'the old replicas are still draining when the deployment has succeeded',
    );
    assert.equal((await viaIngress(ingressPort, host)).body, 'v2\n');
    await pollUntil('the old replicas to be gone', async () =>
      (await containersOf(first)).length === 0 ? true : undefined,
    );
    // Each stop takes its full ten seconds: one after the other would take twenty.
    assert.ok(Date.now() - succeededAt < 18_000, `drained in ${Date.now() - succeededAt} ms`);

    // A crash while the v2 replicas drain: the next start finishes the drain.
    const third = await deploy('v1');
    // Spare network sandboxes (on by default) belong to no deployment.
    const replicas = async () =>
      (await containersOfService(service.id)).filter((c) => c.Labels['berth.role'] === 'replica');
    const draining = (await replicas()).filter((c) => c.Labels['berth.deployment'] !== third);
    assert.equal(draining.length, 2);
    await berth.kill('SIGKILL');
    berth = await server.serve();
    await pollUntil(
      'the drain cut short to be finished',
      async () => {
        const left = await replicas();
        return left.every((c) => c.Labels['berth.deployment'] === third) ? left : undefined;
      },
      { timeoutMs: 60_000 },
    );
    assert.equal((await containersOf(third)).filter((c) => c.State === 'running').length, 2);
    assert.equal((await viaIngress(ingressPort, host)).body, 'v1\n');
  } finally {
    await berth.kill('SIGTERM');
  }
});

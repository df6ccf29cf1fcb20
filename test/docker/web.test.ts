import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import {
  BASE_IMAGE,
  buildImage,
  containersOfService,
  docker,
  pushImage,
  type Registry,
  startRegistry,
  viaIngress,
} from '../helpers/docker.ts';
import { pollUntil } from '../helpers/poll.ts';
import { api, deploymentEnd } from '../helpers/process.ts';
import { serverFixture } from '../helpers/server.ts';

/**
 * A web service from a local registry, two replicas and a secret, reached through Berth's ingress; a
 * failing health check that leaves the old version serving; a restart that loses nothing; a delete
 * that removes everything.
 */
const server = serverFixture('docker', { BERTH_INGRESS_HOST: 'localhost' });
let registry: Registry;
before(async () => {
  registry = await startRegistry();
  const serve = (index: string, ok: boolean) =>
    `FROM ${BASE_IMAGE}\nCMD ["/bin/sh", "-c", "mkdir -p /www && echo \\"${index}\\" > /www/index.html${ok ? ' && echo ok > /www/ok' : ''} && exec httpd -f -p 8080 -h /www"]\n`;
  for (const [tag, index, ok] of [
    ['v1', 'v1 says $GREETING from $HOSTNAME', true],
    ['broken', 'broken', false],
  ] as const) {
    const reference = `${registry.address}/berth-test/web:${tag}`;
    await buildImage(reference, serve(index, ok));
    await pushImage(reference);
  }
});
after(() => registry?.stop());

test('web service: deploy from a registry, serve through the ingress, survive a bad rollout and a restart, delete', async () => {
  const { ingressPort } = server;
  let berth = await server.serve();
  try {
    const started = await server.firstStart(berth);
    const token = started.token;
    const envId = started.envId;
    const identity = (await api(`${berth.url}/v1/environments/${envId}`, token)).body.data;
    assert.equal(identity.ingress_host, 'localhost');

    const created = await api(`${berth.url}/v1/environments/${envId}/services`, token, 'POST', {
      name: 'Front Page',
      source: 'docker_image',
      type: 'web',
      port: 8080,
      replica_count: 2,
      cpu_count_min: 0.25,
      cpu_count_max: 0.5,
      memory_mb_min: 64,
      memory_mb_max: 128,
      docker_registry: registry.address,
      docker_image: 'berth-test/web',
      secrets: [{ key: 'GREETING', value: 'hello-from-a-secret', is_sensitive: true }],
      ops_json: JSON.stringify({
        health_check: { type: 'http', path: '/ok', timeout: 2 },
        deploy_timeout: 1,
      }),
    });
    assert.equal(created.status, 200, JSON.stringify(created.body));
    const service = created.body.data.service;
    const serviceUrl = `${berth.url}/v1/environments/${envId}/services/${service.id}`;
    const host = `${service.subdomain}.localhost`;

    const deployAndWait = async (tag: string) => {
      const res = await api(`${serviceUrl}/deploy`, token, 'POST', { docker_image_tag: tag });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      return deploymentEnd(berth.url, token, res.body.data.deployment_id, 150_000);
    };

    const first = await deployAndWait('v1');
    assert.equal(first.state, 'success', first.failure_reason);
    // The digest the registry gave the tag: what ran, even if v1 is pushed again later.
    const pushed = await docker.getImage(`${registry.address}/berth-test/web:v1`).inspect();
    assert.ok(
      pushed.RepoDigests.includes(`${registry.address}/berth-test/web@${first.docker_image_digest}`),
      first.docker_image_digest,
    );
    const live = (await api(serviceUrl, token)).body.data;
    assert.equal(live.run_status, 'running');
    assert.equal(live.ready_count, 2);
    assert.equal(live.service.state, 'running');
    // The origin is a URL that works as it is: the ingress's scheme and port.
    assert.equal(live.service.origin, `http://${host}:${ingressPort}`);
    const origin = new URL(live.service.origin);
    assert.equal((await viaIngress(Number(origin.port), origin.hostname)).status, 200);

    // Both replicas answer through the ingress, with the secret in their environment.
    const hosts = new Set<string>();
    for (let i = 0; i < 6; i++) {
      const page = await viaIngress(ingressPort, host);
      assert.equal(page.status, 200);
      const match = /^v1 says hello-from-a-secret from (\S+)$/.exec(page.body.trim());
      assert.ok(match, page.body);
      hosts.add(match[1] as string);
    }
    assert.equal(hosts.size, 2, 'the ingress spreads requests over both replicas');
    // A spare network sandbox (docs/docker-provider.md) may already wait beside them.
    const containers = (await containersOfService(service.id, false)).filter(
      (c) => c.Labels['berth.role'] === 'replica',
    );
    assert.equal(containers.length, 2);
    const inspected = await docker.getContainer(containers[0]?.Id as string).inspect();
    assert.equal(inspected.HostConfig.Memory, 128 * 1024 * 1024);
    assert.equal(inspected.HostConfig.NanoCpus, 0.5e9);
    assert.equal(inspected.Config.Labels['berth.environment'], envId);
    assert.equal(inspected.Config.Labels['berth.deployment'], first.id);
    const unknown = await viaIngress(ingressPort, 'nobody.localhost');
    assert.equal(unknown.status, 404);

    // A version that never passes its health check: failed with the reason; the old one keeps serving.
    const broken = await deployAndWait('broken');
    assert.equal(broken.state, 'failed');
    assert.match(
      broken.failure_reason,
      /did not become healthy: .*http health check did not pass.*previous version keeps serving/,
    );
    const still = await viaIngress(ingressPort, host);
    assert.match(still.body, /^v1 says/);
    // Spare network sandboxes (on by default) wait for the next rollout.
    const left = (await containersOfService(service.id, true)).filter(
      (c) => c.Labels['berth.role'] !== 'sandbox',
    );
    assert.equal(left.length, 2, 'the broken containers are gone');
    assert.equal((await api(serviceUrl, token)).body.data.ready_count, 2);

    // Restart Berth while the containers run.
    assert.equal(await berth.kill('SIGTERM'), 0);
    berth = await server.serve();
    const afterRestart = (await api(serviceUrl.replace(/^http:\/\/[^/]+/, berth.url), token)).body.data;
    assert.equal(afterRestart.run_status, 'running');
    assert.equal(afterRestart.ready_count, 2);
    assert.match((await viaIngress(ingressPort, host)).body, /^v1 says/);

    // Delete removes every container; the host no longer routes.
    const restartedUrl = `${berth.url}/v1/environments/${envId}/services/${service.id}`;
    assert.equal((await api(restartedUrl, token, 'DELETE')).status, 202);
    await pollUntil(
      'the service to be deleted',
      async () => ((await api(restartedUrl, token)).body.data.state === 'deleted' ? true : undefined),
      { timeoutMs: 60_000 },
    );
    assert.deepEqual(await containersOfService(service.id, true), []);
    await pollUntil('the ingress to forget the host', async () =>
      (await viaIngress(ingressPort, host)).status === 404 ? true : undefined,
    );
  } finally {
    await berth.kill('SIGTERM');
  }
});

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { before, test } from 'node:test';
import { promisify } from 'node:util';
import {
  BASE_IMAGE,
  buildImage,
  containersOfService,
  createWebService,
  deploySuccessfully,
  docker,
  viaIngress,
} from '../helpers/docker.ts';
import { pollUntil } from '../helpers/poll.ts';
import { api } from '../helpers/process.ts';
import { serverFixture } from '../helpers/server.ts';

/**
 * By default (Berth's own pause image), a new version starts in a network sandbox made ahead: it is
 * served, the service's aliases resolve to it alone once the old version stopped, a replica whose
 * sandbox stopped or started anew comes back, and the sandboxes go with the replicas and the service.
 */
const server = serverFixture('docker');
const IMAGE = 'berth-test/sandboxed';
const exec = promisify(execFile);

before(async () => {
  for (const version of ['v1', 'v2', 'v3']) {
    await buildImage(
      `${IMAGE}:${version}`,
      `FROM ${BASE_IMAGE}\nCMD ["/bin/sh", "-c", "mkdir -p /www && echo ${version} > /www/index.html && exec httpd -f -p 8080 -h /www"]\n`,
    );
  }
});

const roleOf = (c: { Labels: Record<string, string> }) => c.Labels['berth.role'];
const spares = (all: Awaited<ReturnType<typeof containersOfService>>) =>
  all.filter((c) => roleOf(c) === 'sandbox' && c.Names.some((n) => n.startsWith('/berth-spare-')));

test('a new version starts in a network sandbox made ahead; its aliases resolve to it alone; a replica that lost its sandbox comes back; sandboxes go with their replicas and the service', async () => {
  const { ingressPort } = server;
  const berth = await server.serve();
  try {
    const started = { ...(await server.firstStart(berth)), url: berth.url };
    const { envId } = started;
    const network = `berth-env-${envId}`;
    const service = await createWebService(started, { name: 'Sandboxed', docker_image: IMAGE });
    const host = `${service.subdomain}.localhost`;
    const oldStopped = (deploymentId: string) =>
      pollUntil(
        'the old version to stop',
        async () => {
          const res = await api(`${berth.url}/v1/deployments/${deploymentId}/operations`, started.token);
          const marks: string[] = res.body.data.timeline.map((m: { mark: string }) => m.mark);
          return marks.includes('old_stopped') || undefined;
        },
        { intervalMs: 100 },
      );

    // The first version has no spare to take: its network is made as it starts; a spare follows.
    await deploySuccessfully(started, service.id, 'v1');
    assert.equal((await viaIngress(ingressPort, host)).body, 'v1\n');
    await pollUntil('a spare sandbox', async () => {
      const found = spares(await containersOfService(service.id));
      // Off the network while spare: nothing resolves to a namespace where nothing listens.
      const ready =
        found[0]?.State === 'running' && Object.keys(found[0].NetworkSettings.Networks).length === 0;
      return found.length === 1 && ready ? found[0] : undefined;
    });

    for (const version of ['v2', 'v3']) {
      const deploymentId = await deploySuccessfully(started, service.id, version);
      assert.equal((await viaIngress(ingressPort, host)).body, `${version}\n`);
      await oldStopped(deploymentId);
      const all = await containersOfService(service.id);
      const replicas = all.filter((c) => roleOf(c) === 'replica');
      assert.equal(replicas.length, 1, 'the old version is gone');
      const sandbox = replicas[0]?.HostConfig.NetworkMode.replace(/^container:/, '') ?? '';
      assert.notEqual(sandbox, replicas[0]?.HostConfig.NetworkMode, 'the replica runs in a sandbox');
      const inUse = all.filter((c) => roleOf(c) === 'sandbox' && !spares([c]).length);
      assert.deepEqual(
        inUse.map((c) => c.Id),
        [sandbox],
        "the old version's sandbox went with it",
      );
      const address = (await docker.getContainer(sandbox).inspect()).NetworkSettings.Networks[network]
        ?.IPAddress;
      // What another service of the environment sees under the service's name: the new version, alone.
      const { stdout } = await exec('docker', [
        'run',
        '--rm',
        '--network',
        network,
        BASE_IMAGE,
        'sh',
        '-c',
        `nslookup ${service.subdomain} | grep -A9 '^Name' | grep '^Address' ; wget -qO- http://${service.subdomain}:8080/`,
      ]);
      assert.equal(stdout, `Address: ${address}\n${version}\n`);
      await pollUntil('a new spare sandbox', async () => {
        const found = spares(await containersOfService(service.id));
        const ready =
          found[0]?.State === 'running' && Object.keys(found[0].NetworkSettings.Networks).length === 0;
        return found.length === 1 && ready ? true : undefined;
      });
    }

    // A replica without its sandbox comes back through the observer (every 10 s), served again.
    const replicaAndSandbox = async () => {
      const replica = (await containersOfService(service.id)).find((c) => roleOf(c) === 'replica');
      assert.ok(replica);
      return { replica: replica.Id, sandbox: replica.HostConfig.NetworkMode.replace(/^container:/, '') };
    };
    const servedAgain = (what: string) =>
      pollUntil(
        `the service to answer again after ${what}`,
        async () => ((await viaIngress(ingressPort, host)).body === 'v3\n' ? true : undefined),
        { timeoutMs: 30_000, intervalMs: 200 },
      );
    const { replica, sandbox } = await replicaAndSandbox();
    // The sandbox killed: the replica has no network until both are started again.
    await exec('docker', ['kill', sandbox]);
    await pollUntil('the service to stop answering', async () =>
      (await viaIngress(ingressPort, host).catch(() => null))?.body !== 'v3\n' ? true : undefined,
    );
    await servedAgain('its sandbox was killed');
    // As after an Engine restart that starts the replica before its sandbox: the Engine refuses it.
    await exec('docker', ['kill', replica]);
    await exec('docker', ['kill', sandbox]);
    await assert.rejects(exec('docker', ['start', replica]), /non running container|not running/);
    await servedAgain('the Engine refused to start the replica without its sandbox');
    // The sandbox restarted on its own: the replica still holds the namespace it had, and moves to the new one.
    await exec('docker', ['restart', '-t', '0', sandbox]);
    await servedAgain('its sandbox started anew');
    assert.deepEqual(await replicaAndSandbox(), { replica, sandbox }, 'the same containers, started again');

    assert.equal(
      (await api(`${started.envUrl}/services/${service.id}`, started.token, 'DELETE')).status,
      202,
    );
    await pollUntil('every container of the service to go', async () =>
      (await containersOfService(service.id)).length === 0 ? true : undefined,
    );
  } finally {
    await berth.kill('SIGTERM');
  }
});

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import {
  BASE_IMAGE,
  buildImage,
  createWebService,
  deploySuccessfully,
  pushImage,
  type Registry,
  startRegistry,
  viaIngress,
} from '../helpers/docker.ts';
import { api } from '../helpers/process.ts';
import { serverFixture } from '../helpers/server.ts';

/**
 * A registry image is pulled only when its tag's digest changed: a tag already here under the digest
 * its registry still gives costs one manifest request, and a tag pushed again is pulled and runs.
 */
const server = serverFixture('docker');
let registry: Registry;
const reference = () => `${registry.address}/berth-test/pulled:v1`;
const serving = (text: string) =>
  `FROM ${BASE_IMAGE}\nCMD ["/bin/sh", "-c", "mkdir -p /www && echo ${text} > /www/index.html && exec httpd -f -p 8080 -h /www"]\n`;

before(async () => {
  registry = await startRegistry();
  await buildImage(reference(), serving('first'));
  await pushImage(reference());
});
after(() => registry?.stop());

test('a registry tag is pulled only when its digest changed', async () => {
  const { ingressPort } = server;
  const berth = await server.serve({ BERTH_ALLOWED_REGISTRIES: registry.address });
  try {
    const started = { ...(await server.firstStart(berth)), url: berth.url };
    const service = await createWebService(started, {
      name: 'Pulled',
      docker_registry: registry.address,
      docker_image: 'berth-test/pulled',
    });
    /** Deploys v1 and returns its pull lines. */
    const deploy = async () => {
      const id = await deploySuccessfully(started, service.id, 'v1');
      const logs = await api(`${berth.url}/v1/deployments/${id}/logs`, started.token);
      return (logs.body.data.lines as { step: string; line: string }[])
        .filter((l) => l.step === 'pull')
        .map((l) => l.line);
    };
    const page = async () => (await viaIngress(ingressPort, `${service.subdomain}.localhost`)).body;

    await deploy();
    assert.equal(await page(), 'first\n');

    const unchanged = await deploy();
    assert.ok(
      unchanged.some((l) => l.startsWith(`${reference()} is up to date (sha256:`)),
      unchanged.join('\n'),
    );
    assert.ok(!unchanged.includes(`Pulling ${reference()}`));

    // The tag pushed again (from elsewhere: the engine here still has the old image under it).
    await buildImage(reference(), serving('second'));
    await pushImage(reference());
    await buildImage(reference(), serving('first'));
    const moved = await deploy();
    assert.ok(moved.includes(`Pulling ${reference()}`), moved.join('\n'));
    assert.equal(await page(), 'second\n');
  } finally {
    await berth.kill('SIGTERM');
  }
});

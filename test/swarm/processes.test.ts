import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { assertEachTickRunOnce, deployTicker } from '../helpers/cron-ticks.ts';
import { TEST_DATABASE } from '../helpers/database.ts';
import { freePort, viaIngress } from '../helpers/docker.ts';
import { pollUntil } from '../helpers/poll.ts';
import { api, type BerthProcess, deploymentEnd, firstStartOf } from '../helpers/process.ts';
import { serverFixture } from '../helpers/server.ts';
import { startSwarm, type TestSwarm } from '../helpers/swarm.ts';

/**
 * Berth as it runs on a swarm: real `berth serve` processes with BERTH_PROVIDER=swarm and DOCKER_HOST the
 * test swarm's manager. A web service created and deployed over the HTTP API answers through the
 * process's ingress with its secret variable; a cron service that two `berth serve` processes on one
 * Postgres database both schedule runs each tick once.
 */
let swarm: TestSwarm;
type Served = BerthProcess & { url: string; ingressPort: number };
let first: Served;
let web: string;
const dataDirs: string[] = [];
const INGRESS_HOST = 'swarm.test';
/** One installation: every process holds the key its secrets are sealed with. */
const MASTER_KEY = randomBytes(32).toString('hex');
const servers = serverFixture('swarm', () => ({
  BERTH_MASTER_KEY: MASTER_KEY,
  DOCKER_HOST: swarm.dockerHost,
  BERTH_SWARM_MONITOR_S: '1',
  BERTH_INGRESS_HOST: INGRESS_HOST,
  BERTH_ALLOWED_REGISTRIES: swarm.registry,
  // The cron scheduler says which process ran a tick and which found it taken (debug).
  BERTH_LOG_LEVEL: 'debug',
}));

/** `berth serve` on the file's database: the first with the fixture's data dir and ingress, another with its own. */
async function serve(other?: { dataDir: string; ingressPort: number }): Promise<Served> {
  const ingressPort = other?.ingressPort ?? servers.ingressPort;
  const proc = await servers.serve(
    other ? { BERTH_DATA_DIR: other.dataDir, BERTH_INGRESS_PORT: String(ingressPort) } : {},
  );
  return Object.assign(proc, { ingressPort });
}

before(async () => {
  swarm = await startSwarm(2);
  web = await swarm.pushImage(
    'berth-swarm/api-web',
    'FROM scratch\nCOPY busybox /bin/busybox\nRUN ["/bin/busybox", "--install", "-s", "/bin"]\n' +
      'CMD ["/bin/sh", "-c", "mkdir -p /www && echo \\"$GREETING from $(hostname)\\" > /www/index.html && exec httpd -f -p 8080 -h /www"]\n',
  );
  first = await serve();
});
after(async () => {
  for (const dir of dataDirs) fs.rmSync(dir, { recursive: true, force: true });
  await swarm?.down();
});

test('a web service created and deployed over the HTTP API answers through the ingress on both nodes', async () => {
  const { token, envUrl } = await firstStartOf(first);
  const [registry, image] = [web.split('/')[0], web.slice(web.indexOf('/') + 1).replace(/:latest$/, '')];
  const created = await api(`${envUrl}/services`, token, 'POST', {
    name: 'Front',
    source: 'docker_image',
    docker_registry: registry,
    docker_image: image,
    type: 'web',
    port: 8080,
    replica_count: 2,
    cpu_count_min: 0.1,
    memory_mb_min: 16,
    secrets: [{ key: 'GREETING', value: 'hello over the API' }],
  });
  assert.equal(created.status, 200, JSON.stringify(created.body));
  const service = created.body.data.service;
  const deploy = await api(`${envUrl}/services/${service.id}/deploy`, token, 'POST', {});
  assert.equal(deploy.status, 200, JSON.stringify(deploy.body));
  const end = await deploymentEnd(first.url, token, deploy.body.data.deployment_id, 300_000);
  assert.equal(end.state, 'success', end.failure_reason);

  const host = `${service.subdomain}.${INGRESS_HOST}`;
  const answers = await pollUntil('both replicas to answer through the ingress', async () => {
    const seen = new Set<string>();
    for (let i = 0; i < 6; i++) {
      const res = await viaIngress(first.ingressPort, host).catch(() => ({ status: 0, body: '' }));
      if (res.status !== 200) return undefined;
      assert.match(res.body, /^hello over the API from /);
      seen.add(res.body.trim());
    }
    return seen.size === 2 ? seen : undefined;
  });
  assert.equal(answers.size, 2);
  const live = (await api(`${envUrl}/services/${service.id}`, token)).body.data;
  assert.equal(live.run_status, 'running');
  assert.equal(live.ready_count, 2);
  assert.equal(live.service.state, 'running');
  assert.equal(live.service.origin, `http://${host}:${first.ingressPort}`);
});

test('a cron tick runs once with two berth serve processes scheduling it', {
  skip: TEST_DATABASE !== 'postgres' && 'two Berth processes share a Postgres database, not the embedded one',
}, async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-swarm-second-'));
  dataDirs.push(dir);
  const second = await serve({ dataDir: dir, ingressPort: await freePort() });
  const { token, envUrl } = await firstStartOf(first);
  const id = await deployTicker(
    first,
    { envUrl, token },
    {
      docker_registry: swarm.registry,
      docker_image: 'berth-swarm/busybox',
    },
  );
  await assertEachTickRunOnce(first, second, id);
});

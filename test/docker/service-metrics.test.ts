import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { collectServiceMetrics } from '../../src/jobs/service-metrics.ts';
import {
  BASE_IMAGE,
  buildBaseImage,
  buildImage,
  freePort,
  removeEnvironment,
  requireDocker,
  viaIngress,
} from '../helpers/docker.ts';
import { type Harness, startHarness, type Tenant } from '../helpers/harness.ts';
import { pollUntil } from '../helpers/poll.ts';

/**
 * A web service under a request loop, on real containers: the collector's samples, read through the API,
 * show the requests by status class from the ingress, and the memory its replica holds against its limit.
 */
let h: Harness;
let t: Tenant;
let ingressPort: number;
const IMAGE = 'berth-test/metrics-web';

const SERVE = `#!/bin/sh
mkdir -p /www/cgi-bin /www/dir
echo ok > /www/index.html
printf '#!/bin/sh\\nprintf "HTTP/1.0 500 Oops\\\\r\\\\nContent-Type: text/plain\\\\r\\\\n\\\\r\\\\nboom"\\n' > /www/cgi-bin/fail
chmod +x /www/cgi-bin/fail
# About 24 MB held for the life of the container: its memory approaches the 48 MB limit.
hold=$(head -c 24000000 /dev/zero | tr '\\0' a)
httpd -p 8080 -h /www
while true; do sleep 3600; done
`;

before(async () => {
  await requireDocker();
  await buildBaseImage();
  await buildImage(IMAGE, `FROM ${BASE_IMAGE}\nCOPY serve.sh /serve.sh\nCMD ["/bin/sh", "/serve.sh"]\n`, {
    'serve.sh': SERVE,
  });
  ingressPort = await freePort();
  h = await startHarness({ provider: 'docker', providerEnv: { BERTH_INGRESS_PORT: String(ingressPort) } });
  t = await h.tenant();
  await h.deps.provider.serving?.start();
  await h.startWorker();
});
after(async () => {
  await h?.close();
  if (t) await removeEnvironment(t.envId);
});

test('a service under a request loop shows its requests, their status classes and its memory against its limit', async () => {
  const base = `/v1/environments/${t.envId}/services`;
  const created = await h.request('POST', base, {
    token: t.token,
    body: {
      name: 'Metrics Web',
      source: 'docker_image',
      docker_image: IMAGE,
      type: 'web',
      port: 8080,
      replica_count: 1,
      cpu_count_min: 0.25,
      memory_mb_min: 32,
      memory_mb_max: 48,
    },
  });
  assert.equal(created.status, 200, created.raw);
  const service = created.body.data.service as { id: string; subdomain: string };
  const deploy = await h.request('POST', `${base}/${service.id}/deploy`, { token: t.token, body: {} });
  await pollUntil(
    'the deployment to succeed',
    async () => {
      const d = (
        await h.request('GET', `/v1/deployments/${deploy.body.data.deployment_id}`, { token: t.token })
      ).body.data.deployment;
      assert.notEqual(d.state, 'failed', d.failure_reason);
      return d.state === 'success' ? true : undefined;
    },
    { timeoutMs: 120_000 },
  );
  const host = `${service.subdomain}.localhost`;
  // The first round sets each counter's start (and takes what the health checks left).
  await collectServiceMetrics(h.deps);
  const asked = { '/': 12, '/dir': 3, '/missing': 5, '/cgi-bin/fail': 2 };
  const seen: Record<number, number> = {};
  for (const [path, times] of Object.entries(asked))
    for (let i = 0; i < times; i++) {
      const { status } = await viaIngress(ingressPort, host, path);
      seen[status] = (seen[status] ?? 0) + 1;
    }
  assert.deepEqual(seen, { 200: 12, 302: 3, 404: 5, 500: 2 });
  // The next minute's round.
  await collectServiceMetrics(h.deps, new Date(Date.now() + 60_000));

  const res = await h.request(
    'GET',
    `${base}/${service.id}/metrics?from=${new Date(Date.now() - 600_000).toISOString()}&to=${new Date(Date.now() + 180_000).toISOString()}`,
    { token: t.token },
  );
  assert.equal(res.status, 200, res.raw);
  const last = res.body.data.points.at(-1);
  assert.ok(last, res.raw);
  assert.deepEqual(
    [last.requests, last.status_2xx, last.status_3xx, last.status_4xx, last.status_5xx],
    [22, 12, 3, 5, 2],
  );
  assert.ok(last.latency_p50_ms > 0 && last.latency_p50_ms <= last.latency_p99_ms, res.raw);
  assert.equal(last.memory_limit_bytes, 48 * 1024 * 1024);
  assert.ok(last.memory_bytes > 20_000_000, `the replica holds about 24 MB: ${last.memory_bytes}`);
  assert.ok(last.memory_bytes <= last.memory_limit_bytes);
  assert.ok(last.cpu_cores >= 0);
  assert.ok(last.network_rx_bytes > 0 && last.network_tx_bytes > 0, 'the requests crossed its network');
  assert.equal(last.restarts, 0);
});

import assert from 'node:assert/strict';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
import pino from 'pino';
import { Webhook } from 'standardwebhooks';
import { evaluateAlerts } from '../../src/jobs/alerts.ts';
import { collectServiceMetrics } from '../../src/jobs/service-metrics.ts';
import { openProvider } from '../../src/providers/registry.ts';
import { minuteOf } from '../../src/store/repositories/service-metrics.ts';
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
 * A memory-hungry one (a process that takes most of its limit when asked, and lets it go when asked)
 * opens the memory alert and resolves it, and a webhook receiver gets both, signed.
 */
let h: Harness;
let t: Tenant;
let ingressPort: number;
let receiver: Server;
let receiverUrl: string;
const received: { headers: IncomingHttpHeaders; body: string }[] = [];
const IMAGE = 'berth-test/metrics-web';
const HOG_IMAGE = 'berth-test/metrics-hog';
const MINUTE = 60_000;

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

/**
 * httpd with two CGI scripts: /cgi-bin/hog starts a process that holds 59 MB (dd's one block, read in
 * full, then blocked writing to a pipe nobody reads), /cgi-bin/free ends it.
 */
const HOG = `#!/bin/sh
mkdir -p /www/cgi-bin /tmp
echo ok > /www/index.html
cat > /www/cgi-bin/hog <<'SCRIPT'
#!/bin/sh
( sh -c 'echo $$ > /tmp/hog.pid; exec dd if=/dev/zero bs=59M count=1' 2>/dev/null | sleep 3600 ) </dev/null >/dev/null 2>&1 &
printf 'Content-Type: text/plain\\r\\n\\r\\nholding'
SCRIPT
cat > /www/cgi-bin/free <<'SCRIPT'
#!/bin/sh
kill "$(cat /tmp/hog.pid)"
printf 'Content-Type: text/plain\\r\\n\\r\\nfreed'
SCRIPT
chmod +x /www/cgi-bin/hog /www/cgi-bin/free
httpd -p 8080 -h /www
while true; do sleep 3600; done
`;

before(async () => {
  await requireDocker();
  await buildBaseImage();
  const dockerfile = `FROM ${BASE_IMAGE}\nCOPY serve.sh /serve.sh\nCMD ["/bin/sh", "/serve.sh"]\n`;
  await buildImage(IMAGE, dockerfile, { 'serve.sh': SERVE });
  await buildImage(HOG_IMAGE, dockerfile, { 'serve.sh': HOG });
  ingressPort = await freePort();
  h = await startHarness({
    provider: 'docker',
    providerEnv: { BERTH_INGRESS_PORT: String(ingressPort) },
    webhookAllowPrivate: true,
    webhookRetryBaseMs: 50,
  });
  t = await h.tenant();
  await h.deps.provider.serving?.start();
  await h.startWorker();
  receiver = createServer((req, res) => {
    let body = '';
    req.on('data', (chunk) => {
      body += chunk;
    });
    req.on('end', () => {
      received.push({ headers: req.headers, body });
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hooks`;
});
after(async () => {
  await h?.close();
  if (t) await removeEnvironment(t.envId);
  if (receiver) await new Promise((resolve) => receiver.close(resolve));
});

/** Creates a web service of `image` under a 48 MB or `memoryMb` limit and waits for its deployment. */
async function deployWeb(name: string, image: string, memoryMb: number) {
  const base = `/v1/environments/${t.envId}/services`;
  const created = await h.request('POST', base, {
    token: t.token,
    body: {
      name,
      source: 'docker_image',
      docker_image: image,
      type: 'web',
      port: 8080,
      replica_count: 1,
      cpu_count_min: 0.25,
      memory_mb_min: 32,
      memory_mb_max: memoryMb,
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
  return service;
}

test('a service under a request loop shows its requests, their status classes and its memory against its limit', async () => {
  const base = `/v1/environments/${t.envId}/services`;
  const service = await deployWeb('Metrics Web', IMAGE, 48);
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

test('a memory-hungry service opens the memory alert and resolves it once memory falls; a webhook gets both, signed', async () => {
  const hook = await h.request('POST', '/v1/webhooks', {
    token: t.token,
    body: { url: receiverUrl, event_types: ['alert.opened', 'alert.resolved'] },
  });
  assert.equal(hook.status, 200, hook.raw);
  const secret = hook.body.data.webhook.secret as string;
  const base = `/v1/environments/${t.envId}/services`;
  const service = await deployWeb('Metrics Hog', HOG_IMAGE, 64);
  const limit = 64 * 1024 * 1024;
  // A window of two minutes instead of the default five: the rounds below stand for minutes.
  const rules = await h.request('PUT', `${base}/${service.id}/alert-rules`, {
    token: t.token,
    body: { memory_high: { minutes: 2 } },
  });
  assert.equal(rules.status, 200, rules.raw);
  assert.deepEqual(rules.body.data.rules.memory_high, { enabled: true, percent: 90, minutes: 2 });

  // Each round is the next minute's collection and evaluation, in minutes no other test sampled; the
  // samples are real (the Engine's stats of the running replica), only their minute is chosen.
  const t0 = minuteOf(new Date(Date.now() + 3_600_000)).getTime();
  let minute = 0;
  const round = async () => {
    const at = new Date(t0 + minute++ * MINUTE + 30_000);
    await collectServiceMetrics(h.deps, at);
    const transitions = (await evaluateAlerts(h.deps, at)) ?? [];
    return transitions.filter((tr) => tr.alert.service_id === service.id);
  };
  const memoryNow = async () => {
    const points = (
      await h.request(
        'GET',
        `${base}/${service.id}/metrics?from=${new Date(t0).toISOString()}&to=${new Date(t0 + 60 * MINUTE).toISOString()}`,
        { token: t.token },
      )
    ).body.data.points as { memory_bytes: number; memory_limit_bytes: number }[];
    return points.at(-1);
  };
  const host = `${service.subdomain}.localhost`;

  assert.deepEqual(await round(), [], 'nothing opens while it holds little');
  const idle = await memoryNow();
  assert.ok(idle && idle.memory_bytes < 0.5 * limit, `idle, it holds little: ${idle?.memory_bytes}`);

  assert.equal((await viaIngress(ingressPort, host, '/cgi-bin/hog')).status, 200);
  const opened = await pollUntil(
    'the memory alert to open',
    async () => {
      const transitions = await round();
      return transitions.length > 0 ? transitions : undefined;
    },
    { timeoutMs: 60_000, intervalMs: 250 },
  );
  assert.deepEqual(
    opened.map((tr) => [tr.type, tr.alert.rule]),
    [['alert.opened', 'memory_high']],
  );
  const high = await memoryNow();
  assert.ok(high, 'a sample while it holds the memory');
  assert.equal(high.memory_limit_bytes, limit);
  assert.ok(
    high.memory_bytes > 0.9 * limit && high.memory_bytes <= limit,
    `memory approaches its limit: ${high.memory_bytes} of ${limit}`,
  );
  assert.ok((opened[0]?.alert.value ?? 0) > 90, `the alert's value: ${opened[0]?.alert.value}`);

  assert.equal((await viaIngress(ingressPort, host, '/cgi-bin/free')).status, 200);
  const resolved = await pollUntil(
    'the memory alert to resolve',
    async () => {
      const transitions = await round();
      return transitions.length > 0 ? transitions : undefined;
    },
    { timeoutMs: 60_000, intervalMs: 250 },
  );
  assert.deepEqual(
    resolved.map((tr) => [tr.type, tr.alert.rule, tr.alert.state]),
    [['alert.resolved', 'memory_high', 'resolved']],
  );
  assert.ok(((await memoryNow())?.memory_bytes ?? limit) < 0.5 * limit, 'the memory was given back');

  await pollUntil('both deliveries', async () => (received.length >= 2 ? true : undefined));
  const verifier = new Webhook(secret);
  const payloads = received.map(
    (r) =>
      verifier.verify(r.body, r.headers as Record<string, string>) as {
        type: string;
        data: { id: string; rule: string; state: string; service_id: string };
      },
  );
  assert.deepEqual(payloads.map((p) => p.type).sort(), ['alert.opened', 'alert.resolved']);
  for (const p of payloads) {
    assert.equal(p.data.id, opened[0]?.alert.id);
    assert.equal(p.data.rule, 'memory_high');
  }
  assert.equal(payloads.find((p) => p.type === 'alert.resolved')?.data.state, 'resolved');
});

test("a collector in another process takes the requests the serving process's ingress counted (through the database)", async () => {
  // Another process's driver: its own instance on the same database, serving no ingress.
  const elsewhere = await openProvider(h.deps.config, h.deps.store.db, pino({ level: 'silent' }));
  try {
    const base = `/v1/environments/${t.envId}/services`;
    const service = await deployWeb('Metrics Elsewhere', IMAGE, 48);
    const t0 = minuteOf(new Date(Date.now() + 3 * 3_600_000)).getTime();
    let minute = 0;
    const collectElsewhere = () =>
      collectServiceMetrics({ ...h.deps, provider: elsewhere }, new Date(t0 + minute++ * MINUTE));
    await collectElsewhere();
    const host = `${service.subdomain}.localhost`;
    for (let i = 0; i < 7; i++) assert.equal((await viaIngress(ingressPort, host, '/')).status, 200);
    assert.equal((await viaIngress(ingressPort, host, '/missing')).status, 404);

    const points = async () =>
      (
        await h.request(
          'GET',
          `${base}/${service.id}/metrics?from=${new Date(t0).toISOString()}&to=${new Date(t0 + 60 * MINUTE).toISOString()}`,
          { token: t.token },
        )
      ).body.data.points as {
        requests: number;
        status_2xx: number;
        status_4xx: number;
        latency_p50_ms: number | null;
      }[];
    // The serving process writes its counts every few seconds: each round is the next minute's.
    const seen = await pollUntil(
      "the other process's samples to hold the requests",
      async () => {
        await collectElsewhere();
        const all = await points();
        const sum = (k: 'requests' | 'status_2xx' | 'status_4xx') => all.reduce((n, p) => n + p[k], 0);
        return sum('requests') >= 8 ? { all, requests: sum('requests'), ok: sum('status_2xx') } : undefined;
      },
      { timeoutMs: 30_000, intervalMs: 500 },
    );
    assert.deepEqual([seen.requests, seen.ok], [8, 7]);
    assert.ok(seen.all.some((p) => (p.latency_p50_ms ?? 0) > 0));
    // Taken once: the serving process's own collector finds none of them left.
    await collectServiceMetrics(h.deps, new Date(t0 + minute++ * MINUTE));
    const after = await points();
    assert.equal(after.at(-1)?.requests, 0);
    assert.equal(
      after.reduce((n, p) => n + p.requests, 0),
      8,
    );
  } finally {
    await elsewhere.close();
  }
});

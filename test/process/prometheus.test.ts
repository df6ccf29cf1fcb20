import assert from 'node:assert/strict';
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { isDeepStrictEqual } from 'node:util';
import { TEST_DATABASE } from '../helpers/database.ts';
import { pollUntil } from '../helpers/poll.ts';
import { api, type BerthProcess, deploymentEnd, firstStartOf } from '../helpers/process.ts';
import { serverFixture } from '../helpers/server.ts';

/**
 * Issue 29, done-means 1: a real Prometheus (Debian's package) scrapes Berth processes, and PromQL over
 * what it scraped matches the work the test did: deployments by outcome, jobs by kind, requests by
 * status. On Postgres two `berth serve` processes and a `berth worker` share one database and the work; on the embedded
 * database one process does it all. Skipped only where Prometheus is not installed outside CI (.ci/run
 * installs it and sets CI).
 */
const PROMETHEUS = process.env.BERTH_TEST_PROMETHEUS ?? 'prometheus';
const installed = spawnSync(PROMETHEUS, ['--version']).status === 0;
const skip =
  !installed && !process.env.CI ? `${PROMETHEUS} is not installed (apt-get install prometheus)` : false;

const berth = serverFixture('sim', { BERTH_SIM_STEP_MS: '10', BERTH_METRICS_BIND: '127.0.0.1:0' });
let scratch: string;
let prometheus: ChildProcess | undefined;
before(async () => {
  scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-prometheus-'));
});
after(async () => {
  prometheus?.kill('SIGTERM');
  fs.rmSync(scratch, { recursive: true, force: true });
});

async function freePort(): Promise<number> {
  const server = net.createServer().listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** One PromQL instant query: each series's labels and value. */
async function query(
  base: string,
  promql: string,
): Promise<{ labels: Record<string, string>; value: number }[]> {
  const res = await fetch(`${base}/api/v1/query?query=${encodeURIComponent(promql)}`);
  const body = (await res.json()) as {
    status: string;
    data: { result: { metric: Record<string, string>; value: [number, string] }[] };
  };
  assert.equal(body.status, 'success', promql);
  return body.data.result.map((r) => ({ labels: r.metric, value: Number(r.value[1]) }));
}

/** `sum by (label) (...)` as a map from the label's value to the sum. */
async function sums(base: string, promql: string, label: string): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const r of await query(base, promql)) out[r.labels[label] ?? ''] = r.value;
  return out;
}

test('Prometheus scrapes the Berth processes; PromQL counts the deployments, jobs and requests the test made', {
  skip,
  timeout: 240_000,
}, async () => {
  const first = await berth.serve();
  const servers = [first];
  if (TEST_DATABASE === 'postgres') servers.push(await berth.serve());
  const targets = await Promise.all(
    servers.map(async (s) => new URL((await s.waitForOutput(/Metrics: (http:\/\/\S+)/))[1] as string).host),
  );
  // On Postgres a `berth worker` too, which has no API: it serves its own metrics.
  if (TEST_DATABASE === 'postgres') {
    const worker = berth.run(['worker', '--concurrency', '2'], { BERTH_LOG_LEVEL: 'info' });
    const url = (await worker.waitForOutput(/"metrics":"(http:\/\/[^"]+)"/))[1] as string;
    targets.push(new URL(url).host);
  }
  const { token, envId } = await firstStartOf(first);

  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const config = path.join(scratch, 'prometheus.yml');
  fs.writeFileSync(
    config,
    [
      'global:',
      '  scrape_interval: 1s',
      'scrape_configs:',
      '  - job_name: berth',
      '    static_configs:',
      `      - targets: [${targets.map((t) => `'${t}'`).join(', ')}]`,
      '',
    ].join('\n'),
  );
  prometheus = spawn(
    PROMETHEUS,
    [
      `--config.file=${config}`,
      `--storage.tsdb.path=${path.join(scratch, 'data')}`,
      `--web.listen-address=127.0.0.1:${port}`,
    ],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  let prometheusLog = '';
  prometheus.stderr?.on('data', (chunk) => {
    prometheusLog += chunk;
  });
  await pollUntil(
    'Prometheus to be ready',
    async () => ((await fetch(`${base}/-/ready`)).ok ? true : undefined),
    { timeoutMs: 60_000, intervalMs: 200 },
  ).catch((error) => {
    throw new Error(`${(error as Error).message}\n${prometheusLog.slice(-2000)}`);
  });

  // Every process is ready: the database answers, the migrations are current, its workers run.
  for (const s of servers) {
    const ready = await fetch(`${s.url}/ready`);
    assert.equal(ready.status, 200);
    assert.deepEqual(((await ready.json()) as { checks: unknown }).checks, {
      database: 'ok',
      migrations: 'ok',
      worker: 'ok',
    });
  }

  // The work: two services, each deployed once to succeed and once to fail, through both processes.
  const envPath = `/v1/environments/${envId}`;
  const deploymentIds: string[] = [];
  for (const [i, name] of ['Metrics a', 'Metrics b'].entries()) {
    const via = (servers[i % servers.length] as BerthProcess & { url: string }).url;
    const created = await api(`${via}${envPath}/services`, token, 'POST', {
      name,
      source: 'docker_image',
      type: 'web',
      port: 8080,
      replica_count: 1,
      cpu_count_min: 0.5,
      memory_mb_min: 256,
      docker_image: 'acme/web',
    });
    assert.equal(created.status, 200, JSON.stringify(created.body));
    for (const tag of ['v1', 'fail-on-purpose']) {
      const res = await api(
        `${via}${envPath}/services/${created.body.data.service.id}/deploy`,
        token,
        'POST',
        {
          docker_image_tag: tag,
        },
      );
      assert.equal(res.status, 200, JSON.stringify(res.body));
      deploymentIds.push(res.body.data.deployment_id);
    }
  }
  const outcomes: Record<string, number> = {};
  for (const id of deploymentIds) {
    const d = await deploymentEnd(first.url, token, id);
    outcomes[d.state] = (outcomes[d.state] ?? 0) + 1;
  }
  assert.deepEqual(outcomes, { success: 2, failed: 2 });

  // Requests by status on one route no poll of this test uses: 404s and 401s, spread over the processes.
  const expected404 = 7;
  const expected401 = 3;
  for (let i = 0; i < expected404; i++) {
    const s = servers[i % servers.length] as BerthProcess & { url: string };
    assert.equal((await api(`${s.url}/v1/deployments/${randomUUID()}`, token)).status, 404);
  }
  for (let i = 0; i < expected401; i++) {
    const s = servers[i % servers.length] as BerthProcess & { url: string };
    assert.equal((await api(`${s.url}/v1/deployments/${randomUUID()}`, randomUUID())).status, 401);
  }

  const route = 'route="/v1/deployments/:deploymentId"';
  const want = {
    up: targets.length,
    deployments: { success: 2, failed: 2 },
    jobs: { provision_environment: 1, deploy: deploymentIds.length },
    requests: { '404': expected404, '401': expected401 },
  };
  const seen = await pollUntil(
    'the scraped metrics to match the work done',
    async () => {
      const got = {
        up: (await query(base, 'sum(up{job="berth"})'))[0]?.value,
        deployments: await sums(
          base,
          'sum by (outcome) (berth_deployment_duration_seconds_count{provider="sim"})',
          'outcome',
        ),
        jobs: await sums(
          base,
          'sum by (kind) (berth_jobs_claimed_total{kind=~"provision_environment|deploy"})',
          'kind',
        ),
        requests: await sums(
          base,
          `sum by (status) (berth_http_request_duration_seconds_count{${route},method="GET",status=~"401|404"})`,
          'status',
        ),
      };
      return isDeepStrictEqual(got, want) ? got : undefined;
    },
    { timeoutMs: 60_000, intervalMs: 500 },
  ).catch(async (error) => {
    const now = {
      deployments: await query(base, 'berth_deployment_duration_seconds_count').catch(() => null),
      jobs: await query(base, 'berth_jobs_claimed_total').catch(() => null),
    };
    throw new Error(
      `${(error as Error).message}\nwanted ${JSON.stringify(want)}\nscraped ${JSON.stringify(now)}`,
    );
  });
  assert.deepEqual(seen, want);

  // Each process is a target of its own, counted apart (the sums above add them up).
  const perProcess = await query(base, `berth_http_request_duration_seconds_count{${route},status="404"}`);
  assert.equal(new Set(perProcess.map((r) => r.labels.instance)).size, servers.length);
  // Each process is a target of its own: the build info is there once per process.
  assert.equal((await query(base, 'count(berth_build_info)'))[0]?.value, targets.length);
  // The shared queue is reported the same by every process: max, not sum, reads it.
  assert.equal((await query(base, 'max(berth_jobs_queued{kind="deploy"})'))[0]?.value, 0);
});

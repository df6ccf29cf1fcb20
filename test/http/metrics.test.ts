import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { ConfigError, loadConfig } from '../../src/config.ts';
import { startMetricsServer } from '../../src/runtime.ts';
import { type Harness, startHarness, type Tenant, VALID_SERVICE } from '../helpers/harness.ts';
import { pollUntil } from '../helpers/poll.ts';
import { openSse } from '../helpers/sse.ts';

/** Berth's own metrics (docs/metrics.md), read from the process's registry and from GET /metrics. */

/** The value of one series of a metric (a histogram's `_count` or `_sum` named in full), 0 when absent. */
async function sample(h: Harness, name: string, labels: Record<string, string> = {}): Promise<number> {
  const metrics = await h.deps.metrics.registry.getMetricsAsJSON();
  let total = 0;
  for (const metric of metrics) {
    for (const value of metric.values as {
      metricName?: string;
      labels: Record<string, unknown>;
      value: number;
    }[]) {
      if ((value.metricName ?? metric.name) !== name) continue;
      if (Object.entries(labels).every(([k, v]) => String(value.labels[k]) === v)) total += value.value;
    }
  }
  return total;
}

const METRICS_ON = { metricsBind: { host: '127.0.0.1', port: 0 } };

describe('HTTP, refusals and auth failures', () => {
  let h: Harness;
  let t: Tenant;
  let other: Tenant;
  let streamer: Tenant;
  before(async () => {
    h = await startHarness({ ...METRICS_ON, authFailuresPerMin: 2, rateLimitPerMin: 3 });
    t = await h.tenant();
    other = await h.tenant();
    streamer = await h.tenant();
  });
  after(() => h.close());

  test('open event streams are counted while they are open', async () => {
    const address = await h.app.listen({ port: 0, host: '127.0.0.1' });
    const open = () => sample(h, 'berth_open_streams');
    assert.equal(await open(), 0);
    const streams = [
      await openSse(`${address}/v1/events`, streamer.token),
      await openSse(`${address}/v1/events`, streamer.token),
    ];
    assert.equal(await open(), 2);
    for (const stream of streams) stream.close();
    await pollUntil('the streams to be closed', async () => ((await open()) === 0 ? true : undefined));
  });

  test('requests are counted by route template, method and status, with their latency', async () => {
    for (let i = 0; i < 2; i++) {
      assert.equal((await h.request('GET', `/v1/environments/${t.envId}`, { token: t.token })).status, 200);
    }
    const missing = '00000000-0000-4000-8000-000000000000';
    assert.equal((await h.request('GET', `/v1/environments/${missing}`, { token: t.token })).status, 404);
    const route = { route: '/v1/environments/:envId', method: 'GET' };
    assert.equal(
      await sample(h, 'berth_http_request_duration_seconds_count', { ...route, status: '200' }),
      2,
    );
    assert.equal(
      await sample(h, 'berth_http_request_duration_seconds_count', { ...route, status: '404' }),
      1,
    );
    assert.ok((await sample(h, 'berth_http_request_duration_seconds_sum', route)) > 0);
  });

  test('a path no route matches is counted as `unmatched`: what a client sent never becomes a label', async () => {
    const hostile = `/v1/nothing/${encodeURIComponent('a"b\\c\nd')}`;
    assert.equal((await h.request('GET', hostile, { token: t.token })).status, 404);
    const text = await h.deps.metrics.registry.metrics();
    assert.ok(!text.includes('nothing'), 'the path reached the exposition');
    assert.ok(
      (await sample(h, 'berth_http_request_duration_seconds_count', { route: 'unmatched', status: '404' })) >=
        1,
    );
  });

  test('failed authentications and the refusals they and the rate limit cause are counted', async () => {
    const statuses: number[] = [];
    for (let i = 0; i < 4; i++)
      statuses.push((await h.request('GET', '/v1/environments', { token: other.token })).status);
    assert.deepEqual(statuses, [200, 200, 200, 429]);
    assert.equal(await sample(h, 'berth_refusals_total', { reason: 'rate_limit' }), 1);

    // Last: the address is refused from here on, whatever token it sends.
    const before = await sample(h, 'berth_auth_failures_total', { surface: 'api' });
    const wrong = 'ffffffff-ffff-4fff-8fff-ffffffffffff';
    for (let i = 0; i < 2; i++) {
      assert.equal((await h.request('GET', '/v1/environments', { token: wrong })).status, 401);
    }
    assert.equal((await h.request('GET', '/v1/environments', { token: wrong })).status, 429);
    assert.equal((await sample(h, 'berth_auth_failures_total', { surface: 'api' })) - before, 2);
    assert.equal(await sample(h, 'berth_refusals_total', { reason: 'auth_failures' }), 1);
  });

  test('database statements are timed', async () => {
    assert.ok((await sample(h, 'berth_db_statement_duration_seconds_count', { outcome: 'ok' })) > 0);
  });

  test('GET /metrics on BERTH_METRICS_BIND answers in the Prometheus text format; other paths 404', async () => {
    const server = await startMetricsServer(h.deps);
    assert.ok(server);
    try {
      const res = await fetch(server.url);
      assert.equal(res.status, 200);
      assert.match(res.headers.get('content-type') ?? '', /^text\/plain; version=0\.0\.4/);
      const text = await res.text();
      assert.match(text, /^# TYPE berth_http_request_duration_seconds histogram$/m);
      assert.match(text, /^berth_build_info\{version="\d+\.\d+\.\d+",node="[^"]+"\} 1$/m);
      assert.match(text, /^berth_jobs_queued\{kind="deploy"\} \d+$/m);
      assert.match(text, /^process_cpu_user_seconds_total \d/m);
      assert.equal((await fetch(new URL('/other', server.url))).status, 404);
    } finally {
      await server.close();
    }
  });
});

describe('jobs and deployments', () => {
  let h: Harness;
  let t: Tenant;
  before(async () => {
    h = await startHarness(METRICS_ON);
    t = await h.tenant();
  });
  after(() => h.close());

  test('jobs are counted by kind and deployments by provider and outcome, with their durations', async () => {
    const created = await h.request('POST', `/v1/environments/${t.envId}/services`, {
      token: t.token,
      body: VALID_SERVICE.docker,
    });
    assert.equal(created.status, 200);
    const serviceId = created.body.data.service.id;
    for (const tag of ['v1', 'fail-on-purpose']) {
      const res = await h.request('POST', `/v1/environments/${t.envId}/services/${serviceId}/deploy`, {
        token: t.token,
        body: { docker_image_tag: tag },
      });
      assert.equal(res.status, 200);
    }
    // Nothing runs yet: the queue shows both deploys waiting.
    assert.equal(await sample(h, 'berth_jobs_queued', { kind: 'deploy' }), 2);
    assert.ok((await sample(h, 'berth_jobs_oldest_age_seconds', { kind: 'deploy' })) > 0);
    await h.startWorker();
    const states = await pollUntil('both deployments to end', async () => {
      const rows = await h.deps.store.db.selectFrom('deployments').select('state').execute();
      return rows.every((r) => r.state === 'success' || r.state === 'failed') ? rows : undefined;
    });
    assert.deepEqual(states.map((r) => r.state).sort(), ['failed', 'success']);
    // Counted once the outcome has committed: poll until the worker has recorded it.
    const deployments = (outcome: string) =>
      sample(h, 'berth_deployment_duration_seconds_count', { provider: 'sim', outcome });
    await pollUntil('the outcomes to be counted', async () =>
      (await deployments('success')) === 1 && (await deployments('failed')) === 1 ? true : undefined,
    );
    assert.ok((await sample(h, 'berth_deployment_duration_seconds_sum', { outcome: 'success' })) > 0);
    await pollUntil('the jobs to be done', async () =>
      (await sample(h, 'berth_job_duration_seconds_count', { kind: 'deploy' })) === 2 ? true : undefined,
    );
    // A failed deployment is an outcome, not a failed job: both deploy jobs finished.
    assert.equal(await sample(h, 'berth_jobs_claimed_total', { kind: 'deploy' }), 2);
    assert.equal(await sample(h, 'berth_job_duration_seconds_count', { kind: 'deploy', outcome: 'done' }), 2);
    assert.equal(await sample(h, 'berth_jobs_failed_total', { kind: 'deploy' }), 0);
    assert.equal(await sample(h, 'berth_jobs_queued', { kind: 'deploy' }), 0);
    assert.equal(await sample(h, 'berth_jobs_oldest_age_seconds', { kind: 'deploy' }), 0);
    assert.equal(await sample(h, 'berth_jobs_running', { kind: 'deploy' }), 0);
    // The tenant's environment was made available without a worker: its provisioning job ran now.
    assert.equal(await sample(h, 'berth_jobs_claimed_total', { kind: 'provision_environment' }), 1);
  });
});

describe('off by default', () => {
  test('without BERTH_METRICS_BIND no request is timed', async () => {
    const h = await startHarness();
    try {
      assert.equal(h.deps.config.metricsBind, undefined);
      assert.equal((await h.request('GET', '/health')).status, 200);
      assert.equal(await sample(h, 'berth_http_request_duration_seconds_count'), 0);
      assert.equal(await sample(h, 'berth_db_statement_duration_seconds_count'), 0);
      assert.equal(await sample(h, 'process_cpu_user_seconds_total'), 0);
    } finally {
      await h.close();
    }
  });

  test('BERTH_METRICS_BIND is host:port, IPv6 in brackets; anything else says what to write', () => {
    assert.deepEqual(loadConfig({ BERTH_METRICS_BIND: '127.0.0.1:9464' }).metricsBind, {
      host: '127.0.0.1',
      port: 9464,
    });
    assert.deepEqual(loadConfig({ BERTH_METRICS_BIND: '[::1]:9464' }).metricsBind, {
      host: '::1',
      port: 9464,
    });
    for (const bad of ['9464', 'localhost', 'host:99999', ':9464', '::1:9464']) {
      assert.throws(
        () => loadConfig({ BERTH_METRICS_BIND: bad }),
        (error: unknown) => {
          assert.ok(error instanceof ConfigError);
          assert.match(
            error.message,
            /BERTH_METRICS_BIND must be host:port \(for instance 127\.0\.0\.1:9464\)/,
          );
          return true;
        },
      );
    }
  });
});

import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { ConfigError, loadConfig } from '../../src/config.ts';
import { collectServiceMetrics, startServiceMetrics } from '../../src/jobs/service-metrics.ts';
import { simSample } from '../../src/providers/sim/metrics.ts';
import { minuteOf } from '../../src/store/repositories/service-metrics.ts';
import { type Harness, startHarness, type Tenant, VALID_SERVICE } from '../helpers/harness.ts';
import { pollUntil } from '../helpers/poll.ts';

let h: Harness;
let t: Tenant;
let base: string;
let webId: string;
let workerId: string;
let deploymentId: string;
const MINUTE = 60_000;
const started = new Date();

async function deployed(body: Record<string, unknown>): Promise<{ id: string; deploymentId: string }> {
  const created = await h.request('POST', `/v1/environments/${t.envId}/services`, { token: t.token, body });
  assert.equal(created.status, 200, created.raw);
  const id = created.body.data.service.id as string;
  const deploy = await h.request('POST', `${base}/${id}/deploy`, { token: t.token, body: {} });
  const deployment = deploy.body.data.deployment_id as string;
  await pollUntil('the deployment to succeed', async () => {
    const d = (await h.request('GET', `/v1/deployments/${deployment}`, { token: t.token })).body.data
      .deployment;
    return d.state === 'success' ? true : undefined;
  });
  return { id, deploymentId: deployment };
}

before(async () => {
  h = await startHarness();
  t = await h.tenant();
  base = `/v1/environments/${t.envId}/services`;
  await h.startWorker();
  const web = await deployed({ ...VALID_SERVICE.docker, memory_mb_max: 512 });
  webId = web.id;
  deploymentId = web.deploymentId;
  workerId = (
    await deployed({
      ...VALID_SERVICE.docker,
      name: 'Worker',
      type: 'worker',
      port: undefined,
      replica_count: 1,
    })
  ).id;
  // Three collection rounds, as three minutes would have them.
  const now = Date.now();
  for (const minutesAgo of [2, 1, 0])
    await collectServiceMetrics(h.deps, new Date(now - minutesAgo * MINUTE));
});
after(() => h.close());

const metrics = (serviceId: string, query = '', token = t.token) =>
  h.request('GET', `${base}/${serviceId}/metrics${query}`, { token });

describe('GET /v1/environments/{envId}/services/{serviceId}/metrics', () => {
  test('serves a minute series of what the collector sampled, with the deployments in the range', async () => {
    const from = new Date(started.getTime() - 5 * MINUTE).toISOString();
    const to = new Date(Date.now() + MINUTE).toISOString();
    const res = await metrics(webId, `?from=${from}&to=${to}&step=60`);
    assert.equal(res.status, 200, res.raw);
    const data = res.body.data;
    assert.deepEqual([data.from, data.to, data.step], [from, to, 60]);
    assert.equal(data.points.length, 3);
    for (const point of data.points) {
      assert.equal(point.samples, 1);
      assert.ok(point.requests > 0, 'a web service has requests');
      assert.equal(point.requests, point.status_2xx + point.status_3xx + point.status_4xx + point.status_5xx);
      assert.ok(point.cpu_cores > 0);
      assert.equal(point.memory_limit_bytes, 512 * 1024 * 1024);
      assert.ok(point.memory_bytes > 0 && point.memory_bytes <= point.memory_limit_bytes);
      assert.ok(point.latency_p50_ms <= point.latency_p95_ms && point.latency_p95_ms <= point.latency_p99_ms);
    }
    const times = data.points.map((p: { time: string }) => Date.parse(p.time));
    assert.deepEqual(
      times.slice(1).map((time: number, i: number) => time - (times[i] as number)),
      [MINUTE, MINUTE],
    );
    assert.deepEqual(
      data.deployments.map((d: { id: string; state: string }) => [d.id, d.state]),
      [[deploymentId, 'success']],
    );
    assert.ok(data.deployments[0].finished_at);
  });

  test('a worker has no requests; a coarser step combines the minutes', async () => {
    const res = await metrics(workerId, '?step=3600');
    assert.equal(res.status, 200, res.raw);
    const total = res.body.data.points.reduce((n: number, p: { samples: number }) => n + p.samples, 0);
    assert.equal(total, 3);
    for (const point of res.body.data.points) {
      assert.equal(point.requests, 0);
      assert.equal(point.latency_p50_ms, null);
      assert.equal(point.memory_limit_bytes, null, 'no memory_mb_max');
    }
  });

  test('defaults: the last hour, one point a minute', async () => {
    const res = await metrics(webId);
    assert.equal(res.status, 200, res.raw);
    const { from, to, step } = res.body.data;
    assert.equal(Date.parse(to) - Date.parse(from), 60 * MINUTE);
    assert.equal(step, 60);
  });

  test('bad ranges are 422s naming the field and its limit', async () => {
    const now = Date.now();
    const at = (ms: number) => new Date(now + ms).toISOString();
    const cases: [string, string, RegExp][] = [
      [`?from=${at(0)}&to=${at(-MINUTE)}`, 'from', /before to/],
      ['?step=59', 'step', /at least 60/],
      [`?from=${at(-31 * 24 * 60 * MINUTE)}`, 'from', /retention of 30 days/],
      [
        `?from=${at(-2 * 24 * 60 * MINUTE)}&to=${at(0)}&step=60`,
        'step',
        /2880 steps of 60 s, more than 1440: use a step of at least 120 s/,
      ],
      ['?from=yesterday', 'from', /date-time/],
      ['?since=1h', 'since', /./],
    ];
    for (const [query, field, error] of cases) {
      const res = await metrics(webId, query);
      assert.equal(res.status, 422, `${query}: ${res.raw}`);
      assert.equal(res.body.error_code, 'validation');
      const named = res.body.errors.find((e: { field: string }) => e.field === field);
      assert.ok(named, `${query} names ${field}: ${res.raw}`);
      assert.match(named.error, error);
    }
    // Both bounds broken: one error on from, with both reasons.
    const both = await metrics(webId, `?from=${at(-40 * 24 * 60 * MINUTE)}&to=${at(-41 * 24 * 60 * MINUTE)}`);
    assert.equal(both.status, 422, both.raw);
    const onFrom = both.body.errors.filter((e: { field: string }) => e.field === 'from');
    assert.equal(onFrom.length, 1, both.raw);
    assert.match(onFrom[0].error, /^from must be before to; from must be within the retention of 30 days/);
  });

  test("another account's service, an unknown one and a non-UUID id are 404", async () => {
    const other = await h.tenant();
    assert.equal((await metrics(webId, '', other.token)).status, 404);
    assert.equal((await metrics(randomUUID())).status, 404);
    assert.equal((await metrics('not-a-uuid')).status, 404);
  });
});

test('the sim series varies with time and grows with the replicas', () => {
  const service = {
    id: randomUUID(),
    account_id: randomUUID(),
    environment_id: randomUUID(),
    type: 'web' as const,
    subdomain: 's',
    replica_count: 1,
    memory_mb_max: 256,
  };
  const at = new Date('2026-01-01T12:00:00Z');
  const one = simSample(service, 1, at);
  const three = simSample(service, 3, at);
  assert.deepEqual(simSample(service, 1, at), one, 'the same minute reads the same');
  assert.ok((three.cpu_cores ?? 0) > (one.cpu_cores ?? 0));
  assert.ok(three.requests > one.requests);
  const day = Array.from({ length: 24 }, (_, i) =>
    simSample(service, 1, new Date(at.getTime() + i * 3_600_000)),
  );
  assert.ok(new Set(day.map((s) => s.requests)).size > 10, 'it varies over a day');
  for (const s of day) assert.ok((s.memory_bytes ?? 0) <= 256 * 1024 * 1024);
});

test('a collection round samples only the services not sampled yet in its minute; a later minute samples them again', async () => {
  const minute = new Date(minuteOf(new Date(Date.now() + 30 * MINUTE)).getTime() + 10_000);
  assert.equal(await collectServiceMetrics(h.deps, minute), 2);
  // Another round in the same minute (a short interval, or another process): nothing to sample.
  assert.equal(await collectServiceMetrics(h.deps, new Date(minute.getTime() + 20_000)), 0);
  assert.equal(await collectServiceMetrics(h.deps, new Date(minute.getTime() + MINUTE)), 2);
});

test('the collector runs every BERTH_METRICS_INTERVAL_MS, not at all at 0; the setting is checked at the start', async () => {
  const sampledThisMinute = async () =>
    (
      await h.deps.store.db
        .selectFrom('service_metrics')
        .select('service_id')
        .where('resolution_s', '=', 60)
        .where('at', '=', minuteOf(new Date()))
        .execute()
    ).length;
  await h.deps.store.db.deleteFrom('service_metrics').where('at', '=', minuteOf(new Date())).execute();
  const off = startServiceMetrics({ ...h.deps, config: { ...h.deps.config, metricsIntervalMs: 0 } });
  await off.stop();
  assert.equal(await sampledThisMinute(), 0);
  const on = startServiceMetrics({ ...h.deps, config: { ...h.deps.config, metricsIntervalMs: 1000 } });
  try {
    // A round a second: within a few, the services have this minute's sample (or the next minute's,
    // should one begin meanwhile).
    await pollUntil(
      'a round of the collector',
      async () => ((await sampledThisMinute()) === 2 ? true : undefined),
      {
        timeoutMs: 15_000,
        intervalMs: 100,
      },
    );
  } finally {
    await on.stop();
  }

  assert.equal(loadConfig({}).metricsIntervalMs, 60_000);
  assert.equal(loadConfig({ BERTH_METRICS_INTERVAL_MS: '0' }).metricsIntervalMs, 0);
  assert.equal(loadConfig({ BERTH_METRICS_INTERVAL_MS: '1000' }).metricsIntervalMs, 1000);
  for (const bad of ['500', '-1', 'soon', '3600001'])
    assert.throws(
      () => loadConfig({ BERTH_METRICS_INTERVAL_MS: bad }),
      (error: Error) => {
        assert.ok(error instanceof ConfigError);
        assert.match(error.message, /^BERTH_METRICS_INTERVAL_MS must be /);
        return true;
      },
    );
});

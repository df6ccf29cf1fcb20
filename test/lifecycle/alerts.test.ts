import assert from 'node:assert/strict';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
import { Webhook } from 'standardwebhooks';
import { evaluateAlerts } from '../../src/jobs/alerts.ts';
import type { ServiceSample } from '../../src/providers/provider.ts';
import { insertMinuteSamples, minuteOf } from '../../src/store/repositories/service-metrics.ts';
import { type Harness, startHarness, type Tenant, VALID_SERVICE } from '../helpers/harness.ts';
import { pollUntil } from '../helpers/poll.ts';

/**
 * Alert rules driven by inserted minute samples (the sim provider; no collector runs here, the test
 * calls the evaluation as a collection round would): the memory alert opens after five minutes above
 * 90% of the limit and resolves when memory falls, each transition an event a webhook receiver gets,
 * signed the Standard Webhooks way.
 */
let h: Harness;
let t: Tenant;
let serviceId: string;
let base: string;
let receiver: Server;
let receiverUrl: string;
const received: { headers: IncomingHttpHeaders; body: string }[] = [];
const MINUTE = 60_000;
const LIMIT = 512 * 1024 * 1024;

before(async () => {
  h = await startHarness({ webhookAllowPrivate: true, webhookRetryBaseMs: 50, rateLimitPerMin: 100_000 });
  await h.startWorker();
  t = await h.tenant();
  base = `/v1/environments/${t.envId}/services`;
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
  const created = await h.request('POST', base, {
    token: t.token,
    body: { ...VALID_SERVICE.docker, memory_mb_max: 512 },
  });
  assert.equal(created.status, 200, created.raw);
  serviceId = created.body.data.service.id;
  const deploy = await h.request('POST', `${base}/${serviceId}/deploy`, { token: t.token, body: {} });
  const deploymentId = deploy.body.data.deployment_id as string;
  await pollUntil('the deployment to succeed', async () => {
    const d = (await h.request('GET', `/v1/deployments/${deploymentId}`, { token: t.token })).body.data
      .deployment;
    return d.state === 'success' ? true : undefined;
  });
});
after(async () => {
  await h.close();
  await new Promise((resolve) => receiver.close(resolve));
});

const sample = (memoryPercent: number): ServiceSample => ({
  cpu_cores: 0.1,
  memory_bytes: Math.round((LIMIT * memoryPercent) / 100),
  memory_limit_bytes: LIMIT,
  restarts: 0,
  network_rx_bytes: 0,
  network_tx_bytes: 0,
  requests: 0,
  status_2xx: 0,
  status_3xx: 0,
  status_4xx: 0,
  status_5xx: 0,
  latency_p50_ms: null,
  latency_p95_ms: null,
  latency_p99_ms: null,
});

test('the memory alert opens after five minutes above 90% of the limit and resolves when memory falls; a webhook gets both, signed', async () => {
  const hook = await h.request('POST', '/v1/webhooks', {
    token: t.token,
    body: { url: receiverUrl, event_types: ['alert.opened', 'alert.resolved'] },
  });
  assert.equal(hook.status, 200, hook.raw);
  const secret = hook.body.data.webhook.secret as string;

  // Minutes well after now, so that nothing else sampled them.
  const t0 = minuteOf(new Date(Date.now() + 2 * 3_600_000)).getTime();
  const round = (minute: number) => evaluateAlerts(h.deps, new Date(t0 + minute * MINUTE + 30_000));
  for (let minute = 0; minute < 4; minute++) {
    await insertMinuteSamples(h.deps.store.db, [
      { serviceId, at: new Date(t0 + minute * MINUTE), values: sample(95) },
    ]);
    assert.deepEqual(await round(minute), [], `no alert after ${minute + 1} minutes`);
  }
  await insertMinuteSamples(h.deps.store.db, [
    { serviceId, at: new Date(t0 + 4 * MINUTE), values: sample(96) },
  ]);
  const opened = await round(4);
  assert.equal(opened?.length, 1);
  assert.equal(opened?.[0]?.type, 'alert.opened');
  assert.equal(opened?.[0]?.alert.rule, 'memory_high');
  assert.equal(opened?.[0]?.alert.value, 96);
  assert.deepEqual(await round(4), [], 'an open alert is not opened again');

  // Still high: stays open. Then it falls: resolved.
  await insertMinuteSamples(h.deps.store.db, [
    { serviceId, at: new Date(t0 + 5 * MINUTE), values: sample(93) },
  ]);
  assert.deepEqual(await round(5), []);
  await insertMinuteSamples(h.deps.store.db, [
    { serviceId, at: new Date(t0 + 6 * MINUTE), values: sample(40) },
  ]);
  const resolved = await round(6);
  assert.deepEqual(
    resolved?.map((r) => [r.type, r.alert.rule, r.alert.state]),
    [['alert.resolved', 'memory_high', 'resolved']],
  );

  const list = await h.request('GET', `${base}/${serviceId}/alerts`, { token: t.token });
  assert.equal(list.status, 200, list.raw);
  assert.equal(list.body.data.alerts.length, 1);
  const [alert] = list.body.data.alerts;
  assert.equal(alert.state, 'resolved');
  assert.equal(alert.rule, 'memory_high');
  assert.equal(alert.value, 96);
  assert.equal(alert.opened_at, new Date(t0 + 4 * MINUTE + 30_000).toISOString());
  assert.equal(alert.resolved_at, new Date(t0 + 6 * MINUTE + 30_000).toISOString());
  assert.match(alert.message, /memory at 96% of its limit, above 90% for 5 minutes/);

  // The events stream holds both, in order.
  const events = await h.deps.store.db
    .selectFrom('events')
    .select(['type', 'data'])
    .where('account_id', '=', t.accountId)
    .where('type', 'like', 'alert.%')
    .orderBy('seq')
    .execute();
  assert.deepEqual(
    events.map((e) => e.type),
    ['alert.opened', 'alert.resolved'],
  );

  await pollUntil('both deliveries', async () => (received.length >= 2 ? true : undefined));
  const verifier = new Webhook(secret);
  const payloads = received.map(
    (r) =>
      verifier.verify(r.body, r.headers as Record<string, string>) as {
        type: string;
        data: { id: string; rule: string; state: string; value: number };
      },
  );
  assert.deepEqual(payloads.map((p) => p.type).sort(), ['alert.opened', 'alert.resolved']);
  for (const p of payloads) {
    assert.equal(p.data.id, alert.id);
    assert.equal(p.data.rule, 'memory_high');
  }
  assert.equal(payloads.find((p) => p.type === 'alert.resolved')?.data.state, 'resolved');
});

test('alert rules: defaults, a PUT over them, 422 naming the field out of range; a rule turned off opens nothing', async () => {
  const url = `${base}/${serviceId}/alert-rules`;
  const read = await h.request('GET', url, { token: t.token });
  assert.equal(read.status, 200, read.raw);
  assert.deepEqual(read.body.data.rules.memory_high, { enabled: true, percent: 90, minutes: 5 });
  assert.deepEqual(read.body.data.rules, read.body.data.defaults);

  const bad = await h.request('PUT', url, {
    token: t.token,
    body: { memory_high: { percent: 150 }, error_rate_high: { minutes: 0 } },
  });
  assert.equal(bad.status, 422, bad.raw);
  const fields = bad.body.errors.map((e: { field: string }) => e.field).sort();
  assert.deepEqual(fields, ['error_rate_high.minutes', 'memory_high.percent']);

  const put = await h.request('PUT', url, {
    token: t.token,
    body: { memory_high: { enabled: false }, error_rate_high: { percent: 10, min_requests: 50 } },
  });
  assert.equal(put.status, 200, put.raw);
  assert.deepEqual(put.body.data.rules.memory_high, { enabled: false, percent: 90, minutes: 5 });
  assert.deepEqual(put.body.data.rules.error_rate_high, {
    enabled: true,
    percent: 10,
    min_requests: 50,
    minutes: 5,
  });
  const again = await h.request('GET', url, { token: t.token });
  assert.deepEqual(again.body.data.rules, put.body.data.rules);

  // Memory high for ten minutes with the rule off: nothing opens.
  const t0 = minuteOf(new Date(Date.now() + 5 * 3_600_000)).getTime();
  for (let minute = 0; minute < 10; minute++)
    await insertMinuteSamples(h.deps.store.db, [
      { serviceId, at: new Date(t0 + minute * MINUTE), values: sample(99) },
    ]);
  assert.deepEqual(await evaluateAlerts(h.deps, new Date(t0 + 9 * MINUTE + 30_000)), []);
});

test('deploy_failed opens as a deployment fails and resolves as the next one succeeds, without waiting for a round', async () => {
  const alertsOf = async () =>
    (await h.request('GET', `${base}/${serviceId}/alerts`, { token: t.token })).body.data.alerts.filter(
      (a: { rule: string }) => a.rule === 'deploy_failed',
    );
  const deploy = async (tag: string, state: string) => {
    const res = await h.request('POST', `${base}/${serviceId}/deploy`, {
      token: t.token,
      body: { docker_image_tag: tag },
    });
    assert.equal(res.status, 200, res.raw);
    const id = res.body.data.deployment_id as string;
    await pollUntil(`the deployment to end ${state}`, async () => {
      const d = (await h.request('GET', `/v1/deployments/${id}`, { token: t.token })).body.data.deployment;
      return d.state === state ? true : undefined;
    });
  };
  await deploy('fail-on-purpose', 'failed');
  const [opened] = await pollUntil('the alert to open', async () => {
    const list = await alertsOf();
    return list.length === 1 ? list : undefined;
  });
  assert.equal(opened.state, 'open');
  assert.match(opened.message, /^the latest deployment failed/);
  await deploy('v2', 'success');
  const [resolved] = await pollUntil('the alert to resolve', async () => {
    const list = await alertsOf();
    return list[0]?.state === 'resolved' ? list : undefined;
  });
  assert.equal(resolved.id, opened.id);
});

test('crash_loop and error_rate_high open on their windows and resolve once the window is clean; too few requests never open', async () => {
  const url = `${base}/${serviceId}/alert-rules`;
  assert.equal((await h.request('PUT', url, { token: t.token, body: {} })).status, 200);
  const t0 = minuteOf(new Date(Date.now() + 9 * 3_600_000)).getTime();
  const at = (minute: number) => new Date(t0 + minute * MINUTE);
  const put = (minute: number, over: Partial<ServiceSample>) =>
    insertMinuteSamples(h.deps.store.db, [{ serviceId, at: at(minute), values: { ...sample(10), ...over } }]);
  const round = async (minute: number) =>
    ((await evaluateAlerts(h.deps, new Date(at(minute).getTime() + 30_000))) ?? []).map((r) => [
      r.type,
      r.alert.rule,
      r.alert.value,
    ]);

  // 10 requests, all 5xx: under the 20-request minimum.
  await put(0, { requests: 10, status_5xx: 10 });
  assert.deepEqual(await round(0), []);
  // Two restarts, then a third within ten minutes; 30 more requests, 1 of them 5xx: 11 of 40 is 27.5%.
  await put(1, { restarts: 2, requests: 30, status_5xx: 1 });
  assert.deepEqual(await round(1), [['alert.opened', 'error_rate_high', 27.5]]);
  await put(2, { restarts: 1, requests: 0 });
  assert.deepEqual(await round(2), [['alert.opened', 'crash_loop', 3]]);
  // Five minutes on, the 5xx have left the window; ten minutes on, the restarts.
  for (let minute = 3; minute <= 6; minute++) await put(minute, { requests: 100 });
  assert.deepEqual(await round(6), [['alert.resolved', 'error_rate_high', 27.5]]);
  for (let minute = 7; minute <= 11; minute++) await put(minute, {});
  assert.deepEqual(await round(11), [['alert.resolved', 'crash_loop', 3]]);
});

test('a cron or a job service with none ready between its runs opens no no_ready_replica alert', async () => {
  const deployed = async (body: Record<string, unknown>) => {
    const created = await h.request('POST', base, { token: t.token, body });
    assert.equal(created.status, 200, created.raw);
    const id = created.body.data.service.id as string;
    const deploy = await h.request('POST', `${base}/${id}/deploy`, { token: t.token, body: {} });
    const deploymentId = deploy.body.data.deployment_id as string;
    await pollUntil('the deployment to succeed', async () => {
      const d = (await h.request('GET', `/v1/deployments/${deploymentId}`, { token: t.token })).body.data
        .deployment;
      return d.state === 'success' ? true : undefined;
    });
    const service = (await h.request('GET', `${base}/${id}`, { token: t.token })).body.data.service;
    assert.equal(service.state, 'running');
    assert.equal(service.ready_count, 0);
    return id;
  };
  const { port: _port, ...worker } = { ...VALID_SERVICE.docker, replica_count: 1 };
  const cron = await deployed({ ...worker, name: 'Nightly', type: 'cron', cron_schedule: '0 3 * * *' });
  const job = await deployed({ ...worker, name: 'Migrate', type: 'job', run_command: 'migrate' });
  await evaluateAlerts(h.deps);
  for (const id of [cron, job]) {
    const alerts = (await h.request('GET', `${base}/${id}/alerts`, { token: t.token })).body.data.alerts;
    assert.deepEqual(alerts, [], id === cron ? 'cron' : 'job');
  }
});

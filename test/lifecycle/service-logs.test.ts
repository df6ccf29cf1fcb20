import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
import { type Harness, startHarness, type Tenant, VALID_SERVICE } from '../helpers/harness.ts';
import { pollUntil } from '../helpers/poll.ts';
import { openSse } from '../helpers/sse.ts';

/** Service logs on the sim provider: plausible lines per replica, tail and since, and follow as SSE. */
let h: Harness;
let t: Tenant;
let baseUrl: string;
let serviceUrl: string;
before(async () => {
  h = await startHarness();
  await h.startWorker();
  t = await h.tenant();
  await h.app.listen({ port: 0, host: '127.0.0.1' });
  baseUrl = `http://127.0.0.1:${(h.app.server.address() as AddressInfo).port}`;
  const created = await h.request('POST', `/v1/environments/${t.envId}/services`, {
    token: t.token,
    body: { ...VALID_SERVICE.docker, replica_count: 2, deploy_now: true },
  });
  assert.equal(created.status, 200, created.raw);
  serviceUrl = `/v1/environments/${t.envId}/services/${created.body.data.service.id}`;
  await pollUntil('the service to run', async () => {
    const res = await h.request('GET', serviceUrl, { token: t.token });
    return res.body.data.service.state === 'running' ? true : undefined;
  });
});
after(() => h.close());

test('the replicas print lines, oldest first, each with its time, replica and stream; tail bounds them', async () => {
  const lines = await pollUntil('four lines', async () => {
    const res = await h.request('GET', `${serviceUrl}/logs?tail=4`, { token: t.token });
    assert.equal(res.status, 200, res.raw);
    return res.body.data.lines.length === 4 ? res.body.data.lines : undefined;
  });
  const replicas = new Set(lines.map((l: { replica: string }) => l.replica));
  assert.equal(replicas.size, 2, 'both replicas print');
  for (const line of lines) {
    assert.match(line.time, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    assert.ok(['stdout', 'stderr'].includes(line.stream));
    assert.ok(line.line.length > 0);
  }
  const times = lines.map((l: { time: string }) => l.time);
  assert.deepEqual([...times].sort(), times, 'oldest first');

  const later = lines.at(-1).time;
  const since = await h.request('GET', `${serviceUrl}/logs?since=${encodeURIComponent(later)}&tail=1000`, {
    token: t.token,
  });
  for (const line of since.body.data.lines) assert.ok(line.time >= later);
});

test('a bad query is a 422 naming the parameter', async () => {
  const res = await h.request('GET', `${serviceUrl}/logs?tail=0`, { token: t.token });
  assert.equal(res.status, 422, res.raw);
  assert.equal(res.body.errors[0].field, 'tail');
  const unknown = await h.request('GET', `${serviceUrl}/logs?lines=5`, { token: t.token });
  assert.equal(unknown.status, 422, unknown.raw);
});

test('follow streams lines printed after the call as server-sent events', async () => {
  const started = new Date().toISOString();
  const stream = await openSse(`${baseUrl}${serviceUrl}/logs?follow=true&tail=1`, t.token);
  try {
    assert.equal(stream.status, 200);
    assert.match(String(stream.headers.get('content-type')), /^text\/event-stream/);
    await stream.until('a line printed after the call', (events) =>
      events.some((e) => e.event === 'line' && e.data.time > started),
    );
    for (const e of stream.events)
      assert.deepEqual(Object.keys(e.data).sort(), ['line', 'replica', 'stream', 'time']);
  } finally {
    stream.close();
  }
});

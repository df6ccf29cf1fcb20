import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
import { Value } from 'typebox/value';
import { Event } from '../../src/api/schemas/events.ts';
import { pruneEvents } from '../../src/store/repositories/events.ts';
import { type Harness, startHarness, type Tenant, VALID_SERVICE } from '../helpers/harness.ts';
import { openSse, type SseEvent } from '../helpers/sse.ts';

/** GET /v1/events in one process (the API and its workers): what a change emits, resume, retention. */
let h: Harness;
let t: Tenant;
let baseUrl: string;
before(async () => {
  h = await startHarness({ providerEnv: { BERTH_SIM_STEP_MS: '30' } });
  await h.startWorker();
  t = await h.tenant();
  await h.app.listen({ port: 0, host: '127.0.0.1' });
  baseUrl = `http://127.0.0.1:${(h.app.server.address() as AddressInfo).port}`;
});
after(() => h.close());

const ofDeployment = (events: SseEvent[], id: string) =>
  events.filter((e) => e.event?.startsWith('deployment.') && e.data.data.id === id);

test('a deployment streams every transition in order, each with its new state; a reconnect resumes exactly', async () => {
  const stream = await openSse(`${baseUrl}/v1/events`, t.token);
  assert.equal(stream.status, 200);
  assert.match(stream.headers.get('content-type') ?? '', /^text\/event-stream/);
  const created = await h.request('POST', `/v1/environments/${t.envId}/services`, {
    token: t.token,
    body: VALID_SERVICE.docker,
  });
  const serviceId = created.body.data.service.id;
  const deployed = await h.request('POST', `/v1/environments/${t.envId}/services/${serviceId}/deploy`, {
    token: t.token,
    body: { docker_image_tag: 'v1' },
  });
  const deploymentId = deployed.body.data.deployment_id;
  await stream.until('the deployment to succeed', (events) =>
    ofDeployment(events, deploymentId).some((e) => e.data.data.state === 'success'),
  );
  stream.close();
  const events = stream.events;
  for (const e of events) {
    const valid = Value.Check(Event, e.data);
    assert.ok(valid, `an Event: ${JSON.stringify(e.data)}`);
    assert.equal(e.id, e.data.id);
    assert.equal(e.event, e.data.type);
    assert.equal(e.data.account_id, t.accountId);
  }
  const ids = events.map((e) => BigInt(e.id as string));
  assert.deepEqual(
    ids,
    [...ids].sort((a, b) => (a < b ? -1 : 1)),
    'ids increase',
  );
  assert.equal(new Set(ids).size, ids.length, 'no event twice');
  assert.deepEqual(
    ofDeployment(events, deploymentId).map((e) => [e.event, e.data.data.state]),
    [
      ['deployment.created', 'queued'],
      ['deployment.updated', 'in_progress'],
      ['deployment.updated', 'success'],
    ],
  );
  assert.ok(events.some((e) => e.event === 'service.created' && e.data.data.id === serviceId));

  // Resuming after the second event: exactly the ones after it, then what comes next.
  const second = events[1]?.id as string;
  const resumed = await openSse(`${baseUrl}/v1/events`, t.token, { 'last-event-id': second });
  await resumed.until('the rest', (got) => got.length >= events.length - 2);
  assert.deepEqual(
    resumed.events.map((e) => e.id),
    events.slice(2).map((e) => e.id),
  );
  await h.request('PUT', `/v1/environments/${t.envId}/services/${serviceId}/secrets`, {
    token: t.token,
    body: { secrets: [{ key: 'API_KEY', value: 'very-secret-value-1', is_sensitive: true }] },
  });
  await resumed.until('the secret write', (got) => got.some((e) => e.event?.startsWith('secret.')));
  resumed.close();
  const secret = resumed.events.find((e) => e.event?.startsWith('secret.'));
  assert.deepEqual(
    { key: secret?.data.data.key, scope: secret?.data.data.scope, scope_id: secret?.data.data.scope_id },
    { key: 'API_KEY', scope: 'service', scope_id: serviceId },
  );
  assert.doesNotMatch(JSON.stringify(resumed.events), /very-secret-value-1/);
});

test('a Last-Event-ID older than retention gets `expired` first, then the events kept', async () => {
  await h.request('PUT', `/v1/environments/${t.envId}/secrets`, {
    token: t.token,
    body: { secrets: [{ key: 'BEFORE_PRUNE', value: 'x' }] },
  });
  const stream = await openSse(`${baseUrl}/v1/events?last_event_id=0`, t.token);
  await stream.until('some events', (got) => got.length > 0);
  stream.close();
  assert.notEqual(stream.events[0]?.event, 'expired', 'nothing was dropped yet');

  const removed = await pruneEvents(h.deps.store.db, new Date(Date.now() + 60_000));
  assert.ok(removed > 0);
  await h.request('PUT', `/v1/environments/${t.envId}/secrets`, {
    token: t.token,
    body: { secrets: [{ key: 'AFTER_PRUNE', value: 'x' }] },
  });
  const late = await openSse(`${baseUrl}/v1/events`, t.token, { 'last-event-id': '0' });
  await late.until('the events after the prune', (got) => got.some((e) => e.event === 'secret.created'));
  late.close();
  assert.equal(late.events[0]?.event, 'expired');
  assert.equal(late.events[0]?.data.last_event_id, '0');
  // The PUT replaced the environment's secrets: one deleted, one created, and nothing from before.
  assert.deepEqual(
    late.events.slice(1).map((e) => [e.event, e.data.data.key]),
    [
      ['secret.deleted', 'BEFORE_PRUNE'],
      ['secret.created', 'AFTER_PRUNE'],
    ],
  );
  assert.ok(BigInt(late.events[1]?.id as string) > BigInt(late.events[0]?.data.oldest_event_id));
});

test('a Last-Event-ID that is not an event id is a 422 naming it', async () => {
  const res = await h.request('GET', '/v1/events', { token: t.token, headers: { 'last-event-id': 'abc' } });
  assert.equal(res.status, 422, res.raw);
  assert.match(res.raw, /Last-Event-ID/);
});

test('a full replace of secrets emits created for new keys, updated for changed ones, deleted for dropped ones, nothing for the rest', async () => {
  const u = await h.tenant();
  const put = async (secrets: Array<Record<string, unknown>>) => {
    const res = await h.request('PUT', `/v1/environments/${u.envId}/secrets`, {
      token: u.token,
      body: { secrets },
    });
    assert.equal(res.status, 200, res.raw);
  };
  await put([
    { key: 'KEEP', value: 'same' },
    { key: 'DROP', value: 'gone' },
    { key: 'CHANGE', value: 'before' },
    { key: 'HIDE', value: 'plain' },
  ]);
  const stream = await openSse(`${baseUrl}/v1/events`, u.token);
  await put([
    { key: 'KEEP', value: 'same' },
    { key: 'CHANGE', value: 'after' },
    { key: 'HIDE', value: 'plain', is_sensitive: true },
    { key: 'NEW', value: 'fresh' },
  ]);
  // A marker after the replace: every event of the replace came before it.
  await put([
    { key: 'KEEP', value: 'same' },
    { key: 'CHANGE', value: 'after' },
    { key: 'HIDE', is_sensitive: true },
    { key: 'NEW', value: 'fresh' },
    { key: 'MARKER', value: 'm' },
  ]);
  await stream.until('the marker', (got) => got.some((e) => e.data.data?.key === 'MARKER'));
  stream.close();
  assert.deepEqual(
    stream.events
      .filter((e) => e.data.data?.scope_id === u.envId)
      .map((e) => [e.event, e.data.data.key])
      .sort(),
    [
      ['secret.created', 'MARKER'],
      ['secret.created', 'NEW'],
      ['secret.deleted', 'DROP'],
      ['secret.updated', 'CHANGE'],
      ['secret.updated', 'HIDE'],
    ],
  );
});

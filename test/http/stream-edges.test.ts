import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { after, test } from 'node:test';
import { startHarness, VALID_SERVICE } from '../helpers/harness.ts';

/**
 * The edges of the streaming routes and their ids: an event id or a log cursor past what PostgreSQL's
 * bigint holds is a 422 (not a 500, not a stream that closes at once and makes an EventSource reconnect
 * forever), a NUL in a query is a 422, and HEAD on a stream answers its headers and ends.
 */
const h = await startHarness();
after(() => h.close());
const t = await h.tenant();
await h.app.listen({ port: 0, host: '127.0.0.1' });
const baseUrl = `http://127.0.0.1:${(h.app.server.address() as AddressInfo).port}`;
const created = await h.request('POST', `/v1/environments/${t.envId}/services`, {
  token: t.token,
  body: VALID_SERVICE.docker,
});
const deployed = await h.request(
  'POST',
  `/v1/environments/${t.envId}/services/${created.body.data.service.id}/deploy`,
  { token: t.token, body: {} },
);
const logsUrl = `/v1/deployments/${deployed.body.data.deployment_id}/logs`;

const PAST_BIGINT = ['9223372036854775808', '9999999999999999999'];

test('an event id past bigint is a 422 on the field that carried it, from the query or the header', async () => {
  for (const id of PAST_BIGINT) {
    const query = await h.request('GET', `/v1/events?last_event_id=${id}`, { token: t.token });
    assert.equal(query.status, 422, query.raw);
    assert.equal(query.body.errors[0].field, 'last_event_id');
    const header = await h.request('GET', '/v1/events', { token: t.token, headers: { 'last-event-id': id } });
    assert.equal(header.status, 422, header.raw);
    assert.equal(header.body.errors[0].field, 'Last-Event-ID');
  }
  const largest = await h.request('GET', '/v1/events?last_event_id=9223372036854775807', { token: t.token });
  assert.equal(largest.status, 200);
  assert.match(String(largest.headers['content-type']), /^text\/event-stream/);
});

test('a log cursor past bigint is a 422, read or followed, from the query or the header', async () => {
  for (const id of PAST_BIGINT) {
    for (const follow of ['', '&follow=true']) {
      const res = await h.request('GET', `${logsUrl}?cursor=${id}${follow}`, { token: t.token });
      assert.equal(res.status, 422, res.raw);
      assert.deepEqual(res.body.errors, [
        { field: 'cursor', error: 'cursor must be a whole number from 0 to 9223372036854775807' },
      ]);
    }
    const header = await h.request('GET', `${logsUrl}?follow=true`, {
      token: t.token,
      headers: { 'last-event-id': id },
    });
    assert.equal(header.status, 422, header.raw);
    assert.equal(header.body.errors[0].field, 'Last-Event-ID');
  }
  for (const id of ['-1', 'abc', '1.5']) {
    const res = await h.request('GET', `${logsUrl}?cursor=${id}`, { token: t.token });
    assert.equal(res.status, 422, res.raw);
    assert.deepEqual(res.body.errors, [
      { field: 'cursor', error: 'cursor must be a whole number from 0 to 9223372036854775807' },
    ]);
  }
  const largest = await h.request('GET', `${logsUrl}?cursor=9223372036854775807`, { token: t.token });
  assert.equal(largest.status, 200, largest.raw);
  assert.deepEqual(largest.body.data.lines, []);
});

test('a NUL in a query parameter is a 422 on that parameter', async () => {
  const res = await h.admin('GET', '/dependency-passwords?arn=%00');
  assert.equal(res.status, 422, res.raw);
  assert.deepEqual(res.body.errors, [{ field: 'arn', error: 'arn must not contain a NUL character' }]);
});

test('HEAD on a stream answers its headers at once and ends', async () => {
  const serviceLogs = `/v1/environments/${t.envId}/services/${created.body.data.service.id}/logs?follow=true`;
  for (const path of ['/v1/events', `${logsUrl}?follow=true`, serviceLogs]) {
    const res = await fetch(`${baseUrl}${path}`, {
      method: 'HEAD',
      headers: { authorization: `Bearer ${t.token}` },
      signal: AbortSignal.timeout(5000),
    });
    assert.equal(res.status, 200, path);
    assert.match(res.headers.get('content-type') ?? '', /^text\/event-stream/);
    assert.ok(res.headers.get('x-request-id'));
    assert.equal(await res.text(), '');
  }
});

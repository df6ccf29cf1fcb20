import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, test } from 'node:test';
// The package's own export, as a user of the package imports it.
import {
  ApiError,
  createClient,
  events,
  followDeployment,
  retryAfterMs,
  unwrap,
  waitForDeployment,
} from 'berth/client';

type Handler = (
  request: http.IncomingMessage,
  body: string,
) => { status: number; headers?: Record<string, string>; body?: unknown };
let handler: Handler = () => ({ status: 500 });
const seen: { method: string; url: string; key: string | undefined; body: string }[] = [];
const server = http.createServer(async (request, response) => {
  let body = '';
  for await (const chunk of request) body += chunk;
  seen.push({
    method: request.method ?? '',
    url: request.url ?? '',
    key: request.headers['idempotency-key'] as string | undefined,
    body,
  });
  const answer = handler(request, body);
  response.writeHead(answer.status, { 'content-type': 'application/json', ...answer.headers });
  response.end(answer.body === undefined ? '' : JSON.stringify(answer.body));
});
await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
after(() => server.close());
const baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

const waits: number[] = [];
const client = createClient({
  baseUrl,
  token: 'a-token',
  retry: { attempts: 4, baseDelayMs: 100, maxDelayMs: 5000, wait: async (ms) => waits.push(ms) },
});

function reset(next: Handler) {
  seen.length = 0;
  waits.length = 0;
  handler = next;
}

const ENV = '00000000-0000-4000-8000-000000000001';
const SERVICE = '00000000-0000-4000-8000-000000000002';

test('429 and 5xx are retried, waiting what Retry-After says (else backing off); a POST keeps one Idempotency-Key', async () => {
  const answers = [
    {
      status: 429,
      headers: { 'retry-after': '2' },
      body: { error_code: 'unknown', message: 'slow down', errors: null },
    },
    { status: 503, body: { error_code: 'unknown', message: 'down', errors: null } },
    { status: 200, body: { message: 'success', data: { deployment_id: 'd1' } } },
  ];
  reset(() => answers.shift() ?? { status: 500 });
  const result = await client.POST('/v1/environments/{envId}/services/{serviceId}/deploy', {
    params: { path: { envId: ENV, serviceId: SERVICE } },
    body: { note: 'hi' },
  });
  assert.equal(result.response.status, 200);
  assert.deepEqual(waits, [2000, 200], 'Retry-After first, then the backoff of the second try');
  assert.equal(seen.length, 3);
  assert.ok(seen[0]?.key);
  assert.ok(
    seen.every((s) => s.key === seen[0]?.key && s.body === '{"note":"hi"}'),
    JSON.stringify(seen),
  );
  assert.equal(seen[0]?.url, `/v1/environments/${ENV}/services/${SERVICE}/deploy`);
});

test('a GET carries no Idempotency-Key; a 4xx is not retried and unwrap throws the API error', async () => {
  reset(() => ({
    status: 422,
    body: {
      error_code: 'validation',
      message: 'Invalid data',
      errors: [{ field: 'port', error: 'required' }],
    },
  }));
  const result = await client.GET('/v1/environments/{envId}', { params: { path: { envId: ENV } } });
  assert.equal(seen.length, 1);
  assert.equal(seen[0]?.key, undefined);
  assert.throws(
    () => unwrap(result),
    (e: unknown) =>
      e instanceof ApiError &&
      e.status === 422 &&
      e.body.errors?.[0]?.field === 'port' &&
      e.message === 'Invalid data',
  );
});

test('retries stop after the attempts allowed and the last answer is returned', async () => {
  reset(() => ({ status: 502, body: { error_code: 'unknown', message: 'bad gateway', errors: null } }));
  const result = await client.GET('/v1/environments');
  assert.equal(result.response.status, 502);
  assert.equal(seen.length, 4);
  assert.deepEqual(waits, [100, 200, 400]);
});

test('Retry-After as an HTTP date, and capped by maxDelayMs', async () => {
  const now = Date.parse('2026-01-01T00:00:00Z');
  assert.equal(retryAfterMs('Thu, 01 Jan 2026 00:00:07 GMT', now), 7000);
  assert.equal(retryAfterMs('nonsense', now), undefined);
  reset(() =>
    seen.length === 1
      ? { status: 429, headers: { 'retry-after': '3600' } }
      : { status: 200, body: { message: 'success', data: { environments: [] } } },
  );
  await client.GET('/v1/environments');
  assert.deepEqual(waits, [5000]);
});

test('waitForDeployment reports each state once and returns the terminal deployment', async () => {
  const states = ['queued', 'queued', 'in_progress', 'in_progress', 'failed'];
  reset(() => ({
    status: 200,
    body: {
      message: 'success',
      data: { deployment: { id: 'd1', state: states.shift(), failure_reason: 'boom' } },
    },
  }));
  const changes: string[] = [];
  const deployment = await waitForDeployment(client, 'd1', {
    intervalMs: 1,
    onChange: (d) => changes.push(d.state),
  });
  assert.equal(deployment.state, 'failed');
  assert.equal(deployment.failure_reason, 'boom');
  assert.deepEqual(changes, ['queued', 'in_progress', 'failed']);
  assert.equal(seen.length, 5);
});

test('waitForDeployment holds each read on the server (If-None-Match + Prefer: wait) instead of polling', async () => {
  const tags: (string | undefined)[] = [];
  const prefers: (string | undefined)[] = [];
  const answers = [
    {
      status: 200,
      headers: { etag: '"q"' },
      body: { message: 'success', data: { deployment: { id: 'd2', state: 'queued' } } },
    },
    { status: 304, headers: { etag: '"q"' } },
    {
      status: 200,
      headers: { etag: '"s"' },
      body: { message: 'success', data: { deployment: { id: 'd2', state: 'success' } } },
    },
  ];
  reset((request) => {
    tags.push(request.headers['if-none-match'] as string | undefined);
    prefers.push(request.headers.prefer as string | undefined);
    return answers.shift() ?? { status: 500 };
  });
  // A poll would sleep an hour between reads: the test ends only if every read after the first waits on the server.
  const deployment = await waitForDeployment(client, 'd2', { intervalMs: 3_600_000, timeoutMs: 60_000 });
  assert.equal(deployment.state, 'success');
  assert.deepEqual(tags, [undefined, '"q"', '"q"']);
  assert.equal(prefers[0], undefined);
  assert.match(prefers[1] ?? '', /^wait=\d+$/);
  assert.ok(Number(prefers[1]?.slice(5)) <= 60);
});

test("a followed stream that the API refuses throws the API's error, message and all", async () => {
  reset(() => ({
    status: 404,
    body: { error_code: 'notfound', message: 'Deployment not found', errors: null },
  }));
  await assert.rejects(
    followDeployment(client, 'd1').next(),
    (e: unknown) => e instanceof ApiError && e.status === 404 && e.message === 'Deployment not found',
  );
  reset(() => ({
    status: 401,
    body: { error_code: 'unauthorized', message: 'You are not authorized to do this action', errors: null },
  }));
  await assert.rejects(
    events(client).next(),
    (e: unknown) =>
      e instanceof ApiError && e.status === 401 && e.message === 'You are not authorized to do this action',
  );
});

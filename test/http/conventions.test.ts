import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { type Harness, startHarness, type Tenant, VALID_SERVICE } from '../helpers/harness.ts';

let h: Harness;
let t: Tenant;
before(async () => {
  h = await startHarness({ rateLimitPerMin: 5000 });
  t = await h.tenant();
});
after(() => h.close());

const unauthorized = {
  error_code: 'unauthorized',
  message: 'You are not authorized to do this action',
  errors: null,
};

describe('authentication', () => {
  test('a missing, malformed or unknown token is 401', async () => {
    for (const authorization of [
      undefined,
      'Bearer',
      'Bearer not-a-uuid',
      'Basic abc',
      `Bearer ${randomUUID()}`,
    ]) {
      const res = await h.request('GET', '/v1/environments', {
        headers: authorization ? { authorization } : {},
      });
      assert.equal(res.status, 401, String(authorization));
      assert.deepEqual(res.body, unauthorized);
    }
  });

  test('a revoked token is 401', async () => {
    const other = await h.tenant();
    assert.equal((await h.request('GET', '/v1/environments', { token: other.token })).status, 200);
    assert.equal((await h.admin('DELETE', `/api-tokens/${other.tokenId}`)).status, 200);
    const res = await h.request('GET', '/v1/environments', { token: other.token });
    assert.equal(res.status, 401);
    assert.deepEqual(res.body, unauthorized);
  });

  test('an account with no active plan is 403 on every call', async () => {
    const other = await h.tenant({ plan: 'none' });
    const res = await h.request('GET', '/v1/environments', { token: other.token });
    assert.equal(res.status, 403);
    assert.deepEqual(res.body, {
      error_code: 'forbidden',
      message: "You don't have an active plan",
      errors: null,
    });
  });

  test('the token is checked before anything else: a bad body with no token is still 401', async () => {
    const res = await h.request('POST', `/v1/environments/${t.envId}/services`, {
      rawBody: '{bad',
      headers: { 'content-type': 'application/json' },
    });
    assert.equal(res.status, 401);
  });
});

describe('envelope, routes and ids', () => {
  test('success is wrapped in {message: "success", data}', async () => {
    const res = await h.request('GET', '/v1/environments', { token: t.token });
    assert.equal(res.status, 200);
    assert.equal(res.body.message, 'success');
    assert.ok(Array.isArray(res.body.data.environments));
  });

  test('unknown routes and wrong methods are 404 notfound in the error shape', async () => {
    for (const [method, url] of [
      ['GET', '/v1/nothing-here'],
      ['PUT', '/v1/environments'],
      ['GET', '/nothing'],
    ]) {
      const res = await h.request(method as string, url as string, { token: t.token });
      assert.equal(res.status, 404, `${method} ${url}`);
      assert.equal(res.body.error_code, 'notfound');
      assert.equal(res.body.errors, null);
    }
  });

  test('a path id that is not a UUID is 404 with the resource named', async () => {
    const cases: [string, string][] = [
      [`/v1/environments/123`, 'Environment not found'],
      [`/v1/environments/${t.envId}/services/abc`, 'Service not found'],
      [`/v1/deployments/xyz`, 'Deployment not found'],
    ];
    for (const [url, message] of cases) {
      const res = await h.request('GET', url, { token: t.token });
      assert.equal(res.status, 404, url);
      assert.deepEqual(res.body, { error_code: 'notfound', message, errors: null });
    }
  });

  test('coming-soon routes answer 404', async () => {
    for (const [method, url] of [
      ['POST', '/v1/environments'],
      ['DELETE', `/v1/environments/${t.envId}`],
      ['DELETE', `/v1/environments/${t.envId}/services/${randomUUID()}/custom-domains/${randomUUID()}`],
    ]) {
      const res = await h.request(method as string, url as string, {
        token: t.token,
        body: method === 'GET' ? undefined : {},
      });
      assert.equal(res.status, 404, `${method} ${url}`);
      assert.equal(res.body.error_code, 'notfound');
    }
  });

  test('x-request-id is echoed when sane and generated otherwise', async () => {
    const echoed = await h.request('GET', '/v1/environments', {
      token: t.token,
      headers: { 'x-request-id': 'ci-run-42.step:7' },
    });
    assert.equal(echoed.headers['x-request-id'], 'ci-run-42.step:7');
    const insane = await h.request('GET', '/v1/environments', {
      token: t.token,
      headers: { 'x-request-id': 'a b <script>' },
    });
    assert.match(String(insane.headers['x-request-id']), /^[0-9a-f-]{36}$/);
    const none = await h.request('GET', '/v1/nothing', {});
    assert.match(String(none.headers['x-request-id']), /^[0-9a-f-]{36}$/);
  });

  test('timestamps are ISO 8601 UTC with milliseconds', async () => {
    const res = await h.request('GET', '/v1/environments', { token: t.token });
    for (const env of res.body.data.environments) {
      assert.match(env.created_at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    }
  });
});

describe('body rules', () => {
  const url = () => `/v1/environments/${t.envId}/services`;
  const bodyError = (cause: string) => ({
    error_code: 'validation',
    message: 'Please check your request body',
    errors: [{ field: 'body', error: cause }],
  });
  const NO_BODY = 'a JSON object is required (at least {})';
  const NOT_JSON = 'Content-Type must be application/json';

  for (const [what, rawBody, contentType, cause] of [
    ['zero bytes', '', 'application/json', NO_BODY],
    ['no body and no content type', undefined, undefined, NO_BODY],
    ['truncated JSON', '{"name": ', 'application/json', 'invalid JSON at position 9'],
    ['invalid JSON', '{"name": "web",, "source": 1}', 'application/json', 'invalid JSON at position 15'],
    ['a JSON array', '[]', 'application/json', 'body must be a JSON object'],
    ['a JSON string', '"hello"', 'application/json', 'body must be a JSON object'],
    ['JSON null', 'null', 'application/json', 'body must be a JSON object'],
    ['a non-JSON content type', 'name=x', 'application/x-www-form-urlencoded', NOT_JSON],
    ['text/plain', '{}', 'text/plain', NOT_JSON],
    ['a body without a content type', '{}', undefined, NOT_JSON],
    [
      '__proto__',
      '{"__proto__": {"x": 1}}',
      'application/json',
      'body must not hold "__proto__" or "constructor.prototype"',
    ],
    [
      'over 1 MiB',
      JSON.stringify({ name: 'x'.repeat(1024 * 1024) }),
      'application/json',
      'larger than 1 MiB',
    ],
  ] as const) {
    test(`${what} is 422 "Please check your request body" with the cause`, async () => {
      const res = await h.request('POST', url(), {
        token: t.token,
        rawBody,
        headers: contentType ? { 'content-type': contentType } : {},
      });
      assert.equal(res.status, 422);
      assert.deepEqual(res.body, bodyError(cause));
    });
  }

  test('a JSON content type with a charset is read', async () => {
    const res = await h.request('POST', url(), {
      token: t.token,
      rawBody: JSON.stringify(VALID_SERVICE.docker),
      headers: { 'content-type': 'application/json; charset=utf-8' },
    });
    assert.equal(res.status, 200, res.raw);
  });

  test('an empty object passes body parsing and fails on fields instead', async () => {
    const res = await h.request('POST', url(), { token: t.token, body: {} });
    assert.equal(res.status, 422);
    assert.equal(res.body.message, 'Invalid data');
    assert.deepEqual(
      res.body.errors.map((e: { field: string }) => e.field),
      ['name', 'source'],
    );
  });

  test('a resource that does not exist is 404 even when the body is bad (404 before 422)', async () => {
    const res = await h.request('POST', `/v1/environments/${randomUUID()}/services`, {
      token: t.token,
      rawBody: '{bad',
      headers: { 'content-type': 'application/json' },
    });
    assert.equal(res.status, 404);
    assert.equal(res.body.message, 'Environment not found');
  });
});

describe('rate limiting', () => {
  test('headers on every authenticated response, 429 rate_limited with Retry-After past the limit', async (ctx) => {
    const limited = await startHarness({ rateLimitPerMin: 3 });
    ctx.after(() => limited.close());
    const tenant = await limited.tenant();
    const first = await limited.request('GET', '/v1/environments', { token: tenant.token });
    assert.equal(first.headers['ratelimit-limit'], '3');
    assert.equal(first.headers['ratelimit-remaining'], '2');
    assert.ok(Number(first.headers['ratelimit-reset']) > 0);
    await limited.request('GET', '/v1/environments', { token: tenant.token });
    await limited.request('GET', '/v1/environments', { token: tenant.token });
    const over = await limited.request('GET', '/v1/environments', { token: tenant.token });
    assert.equal(over.status, 429);
    assert.equal(over.body.error_code, 'rate_limited');
    assert.equal(over.body.errors, null);
    assert.match(over.body.message, /at most 3 requests per minute/);
    assert.ok(Number(over.headers['retry-after']) > 0);
    // Per token: another token of another account is not limited by the first one's use.
    const other = await limited.tenant();
    assert.equal((await limited.request('GET', '/v1/environments', { token: other.token })).status, 200);
  });
});

describe('health', () => {
  test('GET /health needs no token and has no envelope', async () => {
    const res = await h.request('GET', '/health');
    assert.equal(res.status, 200);
    assert.deepEqual(res.body, { message: 'ok' });
  });
});

import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, describe, test } from 'node:test';
import { GIT_REPO_NAME_RULE } from '../../src/domain/git-repo-name.ts';
import { startHarness, VALID_SERVICE } from '../helpers/harness.ts';

/** Issue 17 item 4: inputs that used to crash a handler are field errors now. */
const h = await startHarness({ rateLimitPerMin: 1_000_000 });
after(() => h.close());
const t = await h.tenant();
const env = `/v1/environments/${t.envId}`;
const created = await h.request('POST', `${env}/services`, { token: t.token, body: VALID_SERVICE.docker });
const svc = `${env}/services/${created.body.data.service.id}`;

const deepObject = (depth: number) => `${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`;
const deepArray = (depth: number) => `${'['.repeat(depth)}1${']'.repeat(depth)}`;
const post = (url: string, rawBody: string, method = 'POST') =>
  h.request(method, url, { token: t.token, rawBody, headers: { 'content-type': 'application/json' } });
const TOO_DEEP = {
  error_code: 'validation',
  message: 'Please check your request body',
  errors: [{ field: 'body', error: 'body must not nest arrays and objects more than 64 deep' }],
};

describe('JSON nesting is limited to 64 levels, before anything recurses over the body', () => {
  test('10,000 deep, as a whole body or in a field of the right name, is a 422 naming the body', async () => {
    const named = JSON.stringify({ ...VALID_SERVICE.docker, ops_json: 'X' }).replace(
      '"X"',
      deepObject(10_000),
    );
    for (const [url, raw, method] of [
      [`${env}/services`, deepObject(10_000), 'POST'],
      [`${env}/services`, deepArray(10_000), 'POST'],
      [`${env}/services`, named, 'POST'],
      [`${svc}/secrets`, `{"secrets":[{"key":"K","value":${deepArray(10_000)}}]}`, 'PUT'],
      [`${svc}/deploy`, `{"note":${deepObject(65)}}`, 'POST'],
      [svc, `{"run_command":${deepArray(5000)}}`, 'PATCH'],
    ] as const) {
      const res = await post(url, raw, method);
      assert.equal(res.status, 422, `${method} ${url}: ${res.raw.slice(0, 200)}`);
      assert.deepEqual(res.body, TOO_DEEP);
    }
  });

  test('64 levels reach field validation', async () => {
    const res = await post(`${svc}/deploy`, `{"note":${deepObject(63)}}`);
    assert.equal(res.status, 422);
    assert.deepEqual(res.body.errors, [{ field: 'note', error: 'note must be a string' }]);
  });
});

describe('query strings are validated like bodies', () => {
  test('lists that are not paged take no parameter: ?limit=1 is no page of one', async () => {
    const deployment = await h.request('POST', `${svc}/deploy`, { token: t.token, body: {} });
    assert.equal(deployment.status, 200, deployment.raw);
    for (const url of [
      '/v1/environments',
      '/v1/tokens',
      '/v1/webhooks',
      '/v1/members',
      '/v1/sessions',
      '/v1/passkeys',
      `/v1/deployments/${deployment.body.data.deployment_id}/operations`,
    ]) {
      const res = await h.request('GET', `${url}?limit=1&foo=1`, { token: t.token });
      assert.equal(res.status, 422, `${url}: ${res.raw}`);
      assert.deepEqual(res.body.errors, [{ field: 'limit', error: 'unknown field "limit"' }], url);
      assert.equal((await h.request('GET', url, { token: t.token })).status, 200, url);
    }
  });

  for (const list of ['/services', '/services/:id/deployments', 'audit']) {
    const url =
      list === 'audit' ? '/v1/audit-logs' : `${env}${list.replace('/services/:id', svc.slice(env.length))}`;
    test(`${list}: repeated, unknown and empty parameters are field errors`, async () => {
      for (const [query, errors] of [
        ['?limit=', [{ field: 'limit', error: 'limit must be an integer' }]],
        ['?limit=1&limit=2', [{ field: 'limit', error: 'limit must be given once' }]],
        ['?cursor=a&cursor=b', [{ field: 'cursor', error: 'cursor must be given once' }]],
        ['?limit[]=1', [{ field: 'limit[]', error: 'unknown field "limit[]"; did you mean "limit"?' }]],
        ['?__proto__[x]=1', [{ field: '__proto__[x]', error: 'unknown field "__proto__[x]"' }]],
        // Year 0 is a valid JavaScript date that PostgreSQL refuses (found by the fuzz test).
        [
          `?cursor=${Buffer.from(`0000-01-01T00:00:00.000Z|${randomUUID()}`).toString('base64url')}`,
          [{ field: 'cursor', error: 'cursor must be a next_cursor returned by this endpoint' }],
        ],
      ] as const) {
        const res = await h.request('GET', url + query, { token: t.token });
        assert.equal(res.status, 422, `${query}: ${res.raw}`);
        assert.deepEqual(res.body, { error_code: 'validation', message: 'Invalid data', errors }, query);
      }
      for (const query of ['?=1', '?&&', '?cursor=', '?limit=2']) {
        const res = await h.request('GET', url + query, { token: t.token });
        assert.equal(res.status, 200, `${query}: ${res.raw}`);
      }
    });
  }
});

describe('git_repo_full_name cannot climb out of BERTH_GIT_BASE_URL', () => {
  test('traversal and option-like names are 422 field errors at create and PATCH', async () => {
    const patched = await h.request('POST', `${env}/services`, {
      token: t.token,
      body: VALID_SERVICE.github,
    });
    assert.equal(patched.status, 200, patched.raw);
    const url = `${env}/services/${patched.body.data.service.id}`;
    for (const name of ['../secret-repo', 'acme/../../secret-repo', 'acme/./app', '-acme/app']) {
      const create = await h.request('POST', `${env}/services`, {
        token: t.token,
        body: { ...VALID_SERVICE.github, git_repo_full_name: name },
      });
      const patch = await h.request('PATCH', url, { token: t.token, body: { git_repo_full_name: name } });
      for (const res of [create, patch]) {
        assert.equal(res.status, 422, `${name}: ${res.raw}`);
        assert.deepEqual(res.body.errors, [{ field: 'git_repo_full_name', error: GIT_REPO_NAME_RULE }]);
      }
    }
  });
});

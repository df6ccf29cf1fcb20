import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { etagOf, matches, noneMatch } from '../../src/api/etag.ts';
import { type Harness, startHarness, type Tenant, VALID_SERVICE } from '../helpers/harness.ts';
import { pollUntil } from '../helpers/poll.ts';

let h: Harness;
let t: Tenant;
let serviceId: string;
let deploymentId: string;
before(async () => {
  h = await startHarness();
  await h.startWorker();
  t = await h.tenant();
  const created = await h.request('POST', `/v1/environments/${t.envId}/services`, {
    token: t.token,
    body: VALID_SERVICE.docker,
  });
  serviceId = created.body.data.service.id;
  const deployed = await h.request('POST', `/v1/environments/${t.envId}/services/${serviceId}/deploy`, {
    token: t.token,
    body: {},
  });
  deploymentId = deployed.body.data.deployment_id;
  await pollUntil('the deployment to succeed', async () => {
    const res = await h.request('GET', `/v1/deployments/${deploymentId}`, { token: t.token });
    return res.body.data.deployment.state === 'success' ? true : undefined;
  });
});
after(() => h.close());

const singleResourceGets = () => [
  `/v1/deployments/${deploymentId}`,
  `/v1/environments/${t.envId}`,
  `/v1/environments/${t.envId}/services/${serviceId}`,
  `/v1/environments/${t.envId}/services/${serviceId}/custom-domains`,
  `/v1/environments/${t.envId}/services/${serviceId}/secrets`,
  `/v1/environments/${t.envId}/secrets`,
];

describe('ETag and If-None-Match', () => {
  test('every single-resource GET answers with the ETag of the bytes it sends', async () => {
    for (const url of singleResourceGets()) {
      const res = await h.request('GET', url, { token: t.token });
      assert.equal(res.status, 200, url);
      assert.equal(res.headers.etag, etagOf(res.raw), url);
    }
  });

  test('a current ETag in If-None-Match is a 304 without a body; any other tag gets the representation', async () => {
    for (const url of singleResourceGets()) {
      const first = await h.request('GET', url, { token: t.token });
      const etag = String(first.headers.etag);
      for (const header of [etag, `W/${etag}`, `"other", ${etag}`, '*']) {
        const again = await h.request('GET', url, { token: t.token, headers: { 'if-none-match': header } });
        assert.equal(again.status, 304, `${url} with If-None-Match: ${header}`);
        assert.equal(again.raw, '');
        assert.equal(again.headers.etag, etag);
        assert.equal(again.headers['content-type'], undefined);
      }
      const other = await h.request('GET', url, { token: t.token, headers: { 'if-none-match': '"nope"' } });
      assert.equal(other.status, 200);
      assert.equal(other.raw, first.raw);
    }
  });

  test('a change makes a new ETag, so the old one gets the new representation', async () => {
    const url = `/v1/environments/${t.envId}/services/${serviceId}`;
    const before = await h.request('GET', url, { token: t.token });
    const patched = await h.request('PATCH', url, { token: t.token, body: { replica_count: 3 } });
    assert.equal(patched.status, 200, patched.raw);
    const after = await h.request('GET', url, {
      token: t.token,
      headers: { 'if-none-match': String(before.headers.etag) },
    });
    assert.equal(after.status, 200);
    assert.notEqual(after.headers.etag, before.headers.etag);
    assert.equal(after.body.data.service.replica_count, 3);
  });

  test('errors carry no ETag and are never a 304', async () => {
    const res = await h.request('GET', `/v1/deployments/${crypto.randomUUID()}`, {
      token: t.token,
      headers: { 'if-none-match': '*' },
    });
    assert.equal(res.status, 404);
    assert.equal(res.headers.etag, undefined);
  });

  test('lists and writes carry no ETag', async () => {
    const list = await h.request('GET', `/v1/environments/${t.envId}/services`, { token: t.token });
    assert.equal(list.status, 200);
    assert.equal(list.headers.etag, undefined);
  });

  test('the OpenAPI document names If-None-Match, the ETag header and the 304 of each', async () => {
    const doc = (await h.request('GET', '/v1/openapi.json')).body;
    for (const path of [
      '/v1/deployments/{deploymentId}',
      '/v1/environments/{envId}',
      '/v1/environments/{envId}/services/{serviceId}',
      '/v1/environments/{envId}/services/{serviceId}/custom-domains',
      '/v1/environments/{envId}/services/{serviceId}/secrets',
      '/v1/environments/{envId}/secrets',
    ]) {
      const op = doc.paths[path].get;
      assert.ok(
        op.parameters.some(
          (p: { in: string; name: string }) => p.in === 'header' && p.name === 'if-none-match',
        ),
        path,
      );
      assert.ok(op.responses['200'].headers.ETag, path);
      assert.ok(op.responses['304'], path);
      assert.equal(op.responses['304'].content, undefined, `${path}: a 304 has no body`);
    }
  });
});

describe('the comparison rules (RFC 9110)', () => {
  test('If-None-Match compares weakly; If-Match strongly, and a weak tag never matches it', () => {
    const tag = etagOf('x');
    assert.equal(noneMatch(undefined, tag), true);
    assert.equal(noneMatch(tag, tag), false);
    assert.equal(noneMatch(`W/${tag}`, tag), false);
    assert.equal(noneMatch('"a" , "b"', tag), true);
    assert.equal(noneMatch('*', tag), false);
    assert.equal(matches(undefined, tag), true);
    assert.equal(matches(tag, tag), true);
    assert.equal(matches(`W/${tag}`, tag), false);
    assert.equal(matches(`"a", ${tag}`, tag), true);
    assert.equal(matches('*', tag), true);
    assert.equal(matches('"a"', tag), false);
  });
});

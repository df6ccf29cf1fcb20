import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { type Harness, type Reply, startHarness, type Tenant, VALID_SERVICE } from '../helpers/harness.ts';

/** A field the request schema does not know is a field error naming it, never silently ignored. */
let h: Harness;
let t: Tenant;
before(async () => {
  h = await startHarness({ rateLimitPerMin: 5000 });
  t = await h.tenant();
});
after(() => h.close());

const servicesUrl = () => `/v1/environments/${t.envId}/services`;

function assertInvalid(res: Reply, errors: { field: string; error: string }[]): void {
  assert.equal(res.status, 422, res.raw);
  assert.equal(res.body.error_code, 'validation');
  assert.equal(res.body.message, 'Invalid data');
  assert.deepEqual(res.body.errors, errors);
}

async function createService(body: Record<string, unknown> = {}) {
  const res = await h.request('POST', servicesUrl(), {
    token: t.token,
    body: { ...VALID_SERVICE.docker, ...body },
  });
  assert.equal(res.status, 200, res.raw);
  return res.body.data.service as { id: string } & Record<string, unknown>;
}

describe('unknown fields', () => {
  test('deploy {"tag": "v2"} is refused with a suggestion, and nothing is deployed', async () => {
    const service = await createService();
    const res = await h.request('POST', `${servicesUrl()}/${service.id}/deploy`, {
      token: t.token,
      body: { tag: 'v2' },
    });
    assertInvalid(res, [{ field: 'tag', error: 'unknown field "tag"; did you mean "docker_image_tag"?' }]);
    const deployments = await h.request('GET', `${servicesUrl()}/${service.id}/deployments`, {
      token: t.token,
    });
    assert.deepEqual(deployments.body.data.deployments, []);
  });

  test('create: misspelled fields are reported together with the other field errors', async () => {
    const res = await h.request('POST', servicesUrl(), {
      token: t.token,
      body: { ...VALID_SERVICE.docker, name: 'x', deploynow: true, replicas: 5, colour: 'blue' },
    });
    assertInvalid(res, [
      { field: 'name', error: 'name must be at least 3 characters' },
      { field: 'deploynow', error: 'unknown field "deploynow"; did you mean "deploy_now"?' },
      { field: 'replicas', error: 'unknown field "replicas"; did you mean "replica_count"?' },
      { field: 'colour', error: 'unknown field "colour"' },
    ]);
  });

  test('create: subdomain stays the spec field error', async () => {
    const res = await h.request('POST', servicesUrl(), {
      token: t.token,
      body: { ...VALID_SERVICE.docker, subdomain: 'mine' },
    });
    assertInvalid(res, [{ field: 'subdomain', error: 'subdomain cannot be supplied' }]);
  });

  test('a nested secret entry: {"key": "API_KEY", "val": "123"}', async () => {
    const service = await createService();
    const res = await h.request('PUT', `${servicesUrl()}/${service.id}/secrets`, {
      token: t.token,
      body: { secrets: [{ key: 'API_KEY', val: '123' }] },
    });
    assertInvalid(res, [
      { field: 'secrets[0].val', error: 'unknown field "secrets[0].val"; did you mean "secrets[0].value"?' },
    ]);
    const stored = await h.request('GET', `${servicesUrl()}/${service.id}/secrets`, { token: t.token });
    assert.deepEqual(stored.body.data.secrets, []);
  });

  test('PATCH {"deploy_now": true, "secrets": [...]} is refused, not a silent 200', async () => {
    const service = await createService();
    const res = await h.request('PATCH', `${servicesUrl()}/${service.id}`, {
      token: t.token,
      body: { deploy_now: true, secrets: [{ key: 'K', value: 'v' }] },
    });
    assertInvalid(res, [
      { field: 'deploy_now', error: 'unknown field "deploy_now"' },
      { field: 'secrets', error: 'unknown field "secrets"' },
    ]);
  });

  test('read-modify-write: secrets and a service read back can be sent back as they are', async () => {
    const service = await createService();
    const secretsUrl = `${servicesUrl()}/${service.id}/secrets`;
    const put = await h.request('PUT', secretsUrl, {
      token: t.token,
      body: { secrets: [{ key: 'A', value: '1' }] },
    });
    assert.equal(put.status, 200, put.raw);
    const read = (await h.request('GET', secretsUrl, { token: t.token })).body.data.secrets;
    assert.ok(read[0].updated_at);
    const back = await h.request('PUT', secretsUrl, {
      token: t.token,
      body: { secrets: [...read, { key: 'B', value: '2' }] },
    });
    assert.equal(back.status, 200, back.raw);
    assert.deepEqual(
      back.body.data.secrets.map((s: { key: string }) => s.key),
      ['A', 'B'],
    );

    const full = (await h.request('GET', `${servicesUrl()}/${service.id}`, { token: t.token })).body.data
      .service;
    const patched = await h.request('PATCH', `${servicesUrl()}/${service.id}`, {
      token: t.token,
      body: { ...full, replica_count: 3, subdomain: 'ignored-here' },
    });
    assert.equal(patched.status, 200, patched.raw);
    assert.equal(patched.body.data.service.replica_count, 3);
    assert.equal(patched.body.data.service.subdomain, full.subdomain);
  });

  test('a field with an empty name is named by where it is', async () => {
    const service = await createService();
    const res = await h.request('PUT', `${servicesUrl()}/${service.id}/secrets`, {
      token: t.token,
      body: { '': 1, secrets: [{ key: 'K', '': 2 }] },
    });
    assertInvalid(res, [
      { field: 'body', error: 'body has a field with an empty name' },
      { field: 'secrets[0]', error: 'secrets[0] has a field with an empty name' },
    ]);
  });

  test('custom domains and the admin API refuse unknown fields too', async () => {
    const service = await createService();
    const domain = await h.request('POST', `${servicesUrl()}/${service.id}/custom-domains`, {
      token: t.token,
      body: { domain: 'shop.example.com', domian: 'x' },
    });
    assertInvalid(domain, [{ field: 'domian', error: 'unknown field "domian"; did you mean "domain"?' }]);

    const account = await h.admin('POST', '/accounts', { name: 'acme', plna: 'pro' });
    assertInvalid(account, [{ field: 'plna', error: 'unknown field "plna"; did you mean "plan"?' }]);
  });
});

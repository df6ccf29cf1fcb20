import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { startHarness, VALID_SERVICE } from '../helpers/harness.ts';

/** BERTH_ALLOWED_REGISTRIES: any other registry is refused at create, PATCH and deploy. */
const h = await startHarness({
  rateLimitPerMin: 1_000_000,
  allowedRegistries: ['registry.acme.test', 'localhost:5000'],
});
after(() => h.close());
const t = await h.tenant();
const env = `/v1/environments/${t.envId}`;
const refusal = (field: string, host: string) => ({
  field,
  error: `${field} pulls from ${host}, which is not an allowed registry (allowed: registry.acme.test, localhost:5000)`,
});

test('a registry outside the allow-list is a field error at create, PATCH and deploy', async () => {
  for (const [fields, error] of [
    [{ docker_registry: 'evil.example.com' }, refusal('docker_registry', 'evil.example.com')],
    [{ docker_registry: '127.0.0.1:5432/x' }, refusal('docker_registry', '127.0.0.1:5432')],
    [{ docker_image: 'evil.example.com/app' }, refusal('docker_image', 'evil.example.com')],
    [{ docker_image: 'acme/web' }, refusal('docker_image', 'docker.io')],
  ] as const) {
    const res = await h.request('POST', `${env}/services`, {
      token: t.token,
      body: { ...VALID_SERVICE.docker, ...fields },
    });
    assert.equal(res.status, 422, res.raw);
    assert.deepEqual(res.body.errors, [error]);
  }
  const ok = await h.request('POST', `${env}/services`, {
    token: t.token,
    body: { ...VALID_SERVICE.docker, docker_registry: 'localhost:5000' },
  });
  assert.equal(ok.status, 200, ok.raw);
  const id = ok.body.data.service.id;
  const patched = await h.request('PATCH', `${env}/services/${id}`, {
    token: t.token,
    body: { docker_registry: 'evil.example.com' },
  });
  assert.equal(patched.status, 422, patched.raw);
  assert.deepEqual(patched.body.errors, [refusal('docker_registry', 'evil.example.com')]);

  // A service saved before the list changed (written around the API here) is refused at deploy.
  await h.deps.store.db
    .updateTable('services')
    .set({ docker_registry: 'old.example.com' })
    .where('id', '=', id)
    .execute();
  const deployed = await h.request('POST', `${env}/services/${id}/deploy`, { token: t.token, body: {} });
  assert.equal(deployed.status, 422, deployed.raw);
  assert.deepEqual(deployed.body.errors, [refusal('docker_registry', 'old.example.com')]);
});

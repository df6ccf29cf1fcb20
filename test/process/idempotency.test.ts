import assert from 'node:assert/strict';
import { test } from 'node:test';
import { serverFixture } from '../helpers/server.ts';

/** Idempotency keys live in the database: a retry after the server was killed gets the first answer. */
const server = serverFixture('sim');

async function post(url: string, token: string, key: string, body: unknown) {
  const res = await fetch(url, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', 'idempotency-key': key },
    body: JSON.stringify(body),
  });
  return { status: res.status, text: await res.text(), replayed: res.headers.get('idempotent-replayed') };
}

test('a create and a deploy replayed with their keys after a SIGKILL: one resource, the same answer', async () => {
  const first = await server.serve();
  const { token, envUrl } = await server.firstStart(first);
  const body = {
    name: 'Retried After Kill',
    source: 'docker_image',
    type: 'worker',
    replica_count: 1,
    cpu_count_min: 0.25,
    memory_mb_min: 128,
    docker_image: 'acme/retried',
  };
  const created = await post(`${envUrl}/services`, token, 'create-across-restart', body);
  assert.equal(created.status, 200, created.text);
  const serviceId = JSON.parse(created.text).data.service.id;
  const deployed = await post(`${envUrl}/services/${serviceId}/deploy`, token, 'deploy-across-restart', {});
  assert.equal(deployed.status, 200, deployed.text);
  assert.equal(await first.kill('SIGKILL'), 'SIGKILL');

  const second = await server.serve();
  try {
    const url = `${second.url}${new URL(envUrl).pathname}`;
    const again = await post(`${url}/services`, token, 'create-across-restart', body);
    assert.deepEqual([again.status, again.text, again.replayed], [200, created.text, 'true']);
    const redeployed = await post(`${url}/services/${serviceId}/deploy`, token, 'deploy-across-restart', {});
    assert.deepEqual([redeployed.status, redeployed.text, redeployed.replayed], [200, deployed.text, 'true']);
    const refused = await post(`${url}/services`, token, 'create-across-restart', {
      ...body,
      replica_count: 2,
    });
    assert.equal(refused.status, 422, refused.text);

    const get = (path: string) =>
      fetch(`${url}${path}`, { headers: { authorization: `Bearer ${token}` } }).then(
        (r) => r.json() as Promise<{ data: Record<string, { name: string }[]> }>,
      );
    const services = (await get('/services')).data.services ?? [];
    assert.equal(services.filter((s) => s.name === body.name).length, 1);
    assert.equal((await get(`/services/${serviceId}/deployments`)).data.deployments?.length, 1);
  } finally {
    await second.kill('SIGTERM');
  }
});

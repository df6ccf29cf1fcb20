import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { test } from 'node:test';
import { promisify } from 'node:util';
import { pollUntil } from '../helpers/poll.ts';
import { api } from '../helpers/process.ts';
import { serverFixture } from '../helpers/server.ts';

/** The server as a process: first start, restart, SIGKILL, on the database this run is testing. */
const server = serverFixture('sim');

const SERVICE = {
  name: 'Survivor',
  source: 'docker_image',
  type: 'worker',
  replica_count: 1,
  cpu_count_min: 0.25,
  memory_mb_min: 128,
  docker_image: 'acme/survivor',
};

test('first start prints a token and a curl line that works; a restart finds everything; so does a SIGKILL', async () => {
  const first = await server.serve();
  const token = (await first.waitForOutput(/API token:\s+([0-9a-f-]{36})/))[1] as string;
  const envId = (await first.waitForOutput(/environment:\s+([0-9a-f-]{36})/))[1] as string;

  // The printed curl line, run as printed.
  const curlLine = (
    await first.waitForOutput(/curl -H "Authorization: Bearer [0-9a-f-]{36}" (\S+)\/v1\/environments/)
  )[0];
  const { stdout } = await promisify(execFile)('bash', ['-c', curlLine]);
  const listed = JSON.parse(stdout);
  assert.equal(listed.message, 'success');
  assert.equal(listed.data.environments[0].id, envId);

  await pollUntil('the default environment to be available', async () => {
    const res = await api(`${first.url}/v1/environments/${envId}`, token);
    return res.body.data.environment.state === 'available' ? true : undefined;
  });
  const created = await api(`${first.url}/v1/environments/${envId}/services`, token, 'POST', SERVICE);
  assert.equal(created.status, 200);
  const serviceId = created.body.data.service.id;
  assert.equal(await first.kill('SIGTERM'), 0);

  // Restart: the data is there, and no second "first start".
  const second = await server.serve();
  const again = await api(`${second.url}/v1/environments/${envId}/services/${serviceId}`, token);
  assert.equal(again.status, 200);
  assert.equal(again.body.data.service.name, 'Survivor');
  assert.doesNotMatch(second.stdout(), /First start/);
  const another = await api(`${second.url}/v1/environments/${envId}/services`, token, 'POST', {
    ...SERVICE,
    name: 'Killed Mid Flight',
  });
  assert.equal(another.status, 200);

  // SIGKILL right after a write: nothing that was acknowledged is lost, and the next start is clean.
  assert.equal(await second.kill('SIGKILL'), 'SIGKILL');
  const third = await server.serve();
  const list = await api(`${third.url}/v1/environments/${envId}/services`, token);
  assert.deepEqual(list.body.data.services.map((s: { name: string }) => s.name).sort(), [
    'Killed Mid Flight',
    'Survivor',
  ]);
  const write = await api(`${third.url}/v1/environments/${envId}/services`, token, 'POST', {
    ...SERVICE,
    name: 'After Kill',
  });
  assert.equal(write.status, 200);
  assert.equal(await third.kill('SIGTERM'), 0);
});

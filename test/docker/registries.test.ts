import assert from 'node:assert/strict';
import net from 'node:net';
import { after, before, test } from 'node:test';
import { api, type BerthProcess, deploymentEnd } from '../helpers/process.ts';
import { serverFixture } from '../helpers/server.ts';

/** Issue 17 item 8 against the engine: the allow-list, and a pull from a silent port that fails in time. */
const server = serverFixture('docker');
let berth: BerthProcess & { url: string };
// Accepts connections and never answers, as the machine's PostgreSQL port did to the engine.
const sockets: net.Socket[] = [];
const silent = net.createServer((socket) => {
  sockets.push(socket);
  socket.on('error', () => undefined);
});

before(async () => {
  await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
  const port = (silent.address() as net.AddressInfo).port;
  berth = await server.serve({
    BERTH_ALLOWED_REGISTRIES: `127.0.0.1:${port}`,
    BERTH_PULL_TIMEOUT_MS: '3000',
  });
});
after(async () => {
  for (const s of sockets) s.destroy();
  silent.close();
});

test('a registry outside the list is refused; a pull from a silent registry fails with a reason within its deadline', async () => {
  const { token, envUrl } = await server.firstStart(berth);
  const port = (silent.address() as net.AddressInfo).port;
  const body = {
    name: 'Pulled',
    source: 'docker_image',
    type: 'worker',
    replica_count: 1,
    cpu_count_min: 0.25,
    memory_mb_min: 32,
    docker_image: 'acme/app',
  };
  const outside = await api(`${envUrl}/services`, token, 'POST', {
    ...body,
    docker_registry: 'evil.example.com',
  });
  assert.equal(outside.status, 422, JSON.stringify(outside.body));
  assert.equal(outside.body.errors[0].field, 'docker_registry');

  const created = await api(`${envUrl}/services`, token, 'POST', {
    ...body,
    docker_registry: `127.0.0.1:${port}`,
  });
  assert.equal(created.status, 200, JSON.stringify(created.body));
  const startedAt = Date.now();
  const deploy = await api(`${envUrl}/services/${created.body.data.service.id}/deploy`, token, 'POST', {});
  assert.equal(deploy.status, 200, JSON.stringify(deploy.body));
  const end = await deploymentEnd(berth.url, token, deploy.body.data.deployment_id, 60_000);
  assert.equal(end.state, 'failed');
  assert.match(
    end.failure_reason,
    /could not pull 127\.0\.0\.1:\d+\/acme\/app:latest: the registry did not finish within 3 s/,
  );
  // The deadline, plus the time a loaded machine takes to notice and record it.
  assert.ok(Date.now() - startedAt < 30_000, `took ${Date.now() - startedAt} ms`);
  assert.ok(sockets.length > 0, 'the engine did connect to the silent port');
});

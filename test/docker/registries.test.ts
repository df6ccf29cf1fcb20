import assert from 'node:assert/strict';
import net from 'node:net';
import { after, before, test } from 'node:test';
import { createTestDatabase, type TestDatabase } from '../helpers/database.ts';
import { freePort, removeEnvironment, requireDocker } from '../helpers/docker.ts';
import { api, type BerthProcess, deploymentEnd, firstStartOf, startBerth } from '../helpers/process.ts';

/** Issue 17 item 8 against the engine: the allow-list, and a pull from a silent port that fails in time. */
let db: TestDatabase;
let berth: BerthProcess & { url: string };
let envId: string;
// Accepts connections and never answers, as the machine's PostgreSQL port did to the engine.
const sockets: net.Socket[] = [];
const silent = net.createServer((socket) => {
  sockets.push(socket);
  socket.on('error', () => undefined);
});

before(async () => {
  await requireDocker();
  db = await createTestDatabase();
  await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
  const port = (silent.address() as net.AddressInfo).port;
  berth = await startBerth({
    BERTH_DATA_DIR: db.dataDir,
    BERTH_DATABASE_URL: db.databaseUrl ?? '',
    BERTH_PROVIDER: 'docker',
    BERTH_INGRESS_PORT: String(await freePort()),
    BERTH_ALLOWED_REGISTRIES: `127.0.0.1:${port}`,
    BERTH_PULL_TIMEOUT_MS: '3000',
  });
});
after(async () => {
  await berth?.kill('SIGTERM');
  if (envId) await removeEnvironment(envId);
  for (const s of sockets) s.destroy();
  silent.close();
  await db?.drop();
});

test('a registry outside the list is refused; a pull from a silent registry fails with a reason within its deadline', async () => {
  const started = await firstStartOf(berth);
  envId = started.envId;
  const { token, envUrl } = started;
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

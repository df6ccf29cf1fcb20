import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { BASE_IMAGE, buildImage, containersOfService, docker } from '../helpers/docker.ts';
import { pollUntil } from '../helpers/poll.ts';
import { api, deploymentEnd } from '../helpers/process.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';

/**
 * Issue 17 item 9: cron runs never overlap (Forbid), and a deleted service leaves nothing running.
 * Issue 11: ops.json cron jobs request their path on the service on schedule.
 */
let server: TestServer;

before(async () => {
  // At info, so a miss below can show every tick the server ran and what each request answered.
  server = await startTestServer('docker', { BERTH_LOG_LEVEL: 'info' });
});
after(() => server?.close());

test('a cron command longer than its schedule never runs twice at once; delete stops and removes every run', async () => {
  const { token, envUrl } = server;
  const created = await api(`${envUrl}/services`, token, 'POST', {
    name: 'Slow Cron',
    source: 'docker_image',
    docker_image: 'berth-test/busybox',
    type: 'cron',
    cron_schedule: '* * * * * *',
    run_command: 'sleep 3',
    replica_count: 1,
    cpu_count_min: 0.25,
    memory_mb_min: 32,
  });
  assert.equal(created.status, 200, JSON.stringify(created.body));
  const id = created.body.data.service.id as string;
  const deploy = await api(`${envUrl}/services/${id}/deploy`, token, 'POST', {});
  assert.equal(
    (await deploymentEnd(server.berth.url, token, deploy.body.data.deployment_id, 90_000)).state,
    'success',
  );

  // Every second is a tick; each run takes three. Watch until three runs have finished.
  const runs = async () =>
    (await containersOfService(id)).filter((c) => c.Labels['berth.role'] === 'cron-run');
  let mostAtOnce = 0;
  await pollUntil(
    'three cron runs to finish',
    async () => {
      const now = await runs();
      mostAtOnce = Math.max(mostAtOnce, now.filter((c) => c.State === 'running').length);
      return now.filter((c) => c.State === 'exited').length >= 3 ? true : undefined;
    },
    { timeoutMs: 60_000, intervalMs: 100 },
  );
  assert.equal(mostAtOnce, 1, 'runs overlapped');

  await pollUntil('a run to be running', async () =>
    (await runs()).some((c) => c.State === 'running') ? true : undefined,
  );
  const deleted = await api(`${envUrl}/services/${id}`, token, 'DELETE');
  assert.equal(deleted.status, 202);
  await pollUntil(
    'the service to be deleted',
    async () =>
      (await api(`${envUrl}/services/${id}`, token)).body.data.state === 'deleted' ? true : undefined,
    { timeoutMs: 60_000 },
  );
  // Nothing is left the moment it is deleted, and no tick starts anything afterwards.
  assert.deepEqual(await containersOfService(id), []);
  const watchUntil = Date.now() + 3000;
  const seen: string[] = [];
  await pollUntil('three seconds without a container of the deleted service', async () => {
    for (const c of await containersOfService(id)) seen.push(`${c.Labels['berth.role']} ${c.State}`);
    return Date.now() > watchUntil ? true : undefined;
  });
  assert.deepEqual(seen, []);
});

test("ops.json cron jobs: each tick requests the job's path on the serving replica", async () => {
  const { token, envUrl } = server;
  // busybox httpd with a CGI script that counts its requests in a file.
  await buildImage(
    'berth-test/deps-cron-web:latest',
    `FROM ${BASE_IMAGE}\nRUN mkdir -p /www/cgi-bin /tmp && printf '#!/bin/sh\\necho hit >> /tmp/hits\\nprintf "Content-Type: text/plain\\\\r\\\\n\\\\r\\\\nok"\\n' > /www/cgi-bin/sync && chmod +x /www/cgi-bin/sync\nCMD ["httpd", "-f", "-p", "8080", "-h", "/www"]\n`,
  );
  const created = await api(`${envUrl}/services`, token, 'POST', {
    name: 'Syncing Web',
    source: 'docker_image',
    docker_image: 'berth-test/deps-cron-web',
    type: 'web',
    port: 8080,
    replica_count: 1,
    cpu_count_min: 0.25,
    memory_mb_min: 32,
    ops_json: JSON.stringify({ cron: { cron_jobs: [{ schedule: '* * * * * *', path: '/cgi-bin/sync' }] } }),
  });
  assert.equal(created.status, 200, JSON.stringify(created.body));
  const id = created.body.data.service.id as string;
  const deploy = await api(`${envUrl}/services/${id}/deploy`, token, 'POST', {});
  const end = await deploymentEnd(server.berth.url, token, deploy.body.data.deployment_id, 90_000);
  assert.equal(end.state, 'success', end.failure_reason);

  const [replica] = await containersOfService(id, false);
  assert.ok(replica, 'a replica runs');
  const hits = async () => {
    const exec = await docker.getContainer(replica.Id).exec({
      Cmd: ['/bin/sh', '-c', 'cat /tmp/hits 2>/dev/null | wc -l'],
      AttachStdout: true,
    });
    const stream = await exec.start({});
    const chunks: Buffer[] = [];
    for await (const chunk of stream) chunks.push(chunk as Buffer);
    return Number(/\d+/.exec(Buffer.concat(chunks).toString('latin1'))?.[0] ?? 0);
  };
  // Ticks every second; the rescan picks the new route up within five. On a loaded machine a tick's
  // Engine calls can stall while other tests' containers stop (each is abandoned after 30 s,
  // engine/deadlines.ts), and the ticks meanwhile are skipped (never two at once): the deadline leaves
  // room for that, and a miss shows what the server said of its ticks and replicas.
  await pollUntil('three requests to the cron path', async () => ((await hits()) >= 3 ? true : undefined), {
    timeoutMs: 90_000,
    intervalMs: 500,
  }).catch((error: Error) => {
    const said = `${server.berth.stdout()}\n${server.berth.stderr()}`
      .split('\n')
      .filter((line) => /cron|replica|docker/i.test(line));
    throw new Error(`${error.message}; the server's lines on cron:\n${said.slice(-60).join('\n')}`);
  });
});

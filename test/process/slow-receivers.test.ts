import assert from 'node:assert/strict';
import net from 'node:net';
import { test } from 'node:test';
import { TEST_DATABASE } from '../helpers/database.ts';
import { pollUntil } from '../helpers/poll.ts';
import { api, type BerthProcess, firstStartOf, listening } from '../helpers/process.ts';
import { serverFixture } from '../helpers/server.ts';

/**
 * Issue 24 item 1: webhook receivers that answer one byte a second (after their headers, or inside them)
 * must not hold the slots another account's deployment needs, nor hold their own for ever.
 */
const ADMIN_TOKEN = '6c1f3e2a-5b7d-4c8e-9f0a-1b2c3d4e5f60';
const servers = serverFixture('sim', { BERTH_ADMIN_TOKEN: ADMIN_TOKEN });

/**
 * `/body` answers 200 and its headers at once, then one byte of body a second; `/headers` sends its
 * status line, then one byte of a header a second. Neither ever finishes.
 */
function slowReceiver() {
  const open = { body: 0, headers: 0 };
  const seen = { body: 0, headers: 0 };
  const sockets = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    sockets.add(socket);
    let timer: NodeJS.Timeout | undefined;
    let kind: 'body' | 'headers' | undefined;
    socket.on('error', () => undefined);
    socket.on('close', () => {
      clearInterval(timer);
      sockets.delete(socket);
      if (kind) open[kind]--;
    });
    socket.once('data', (chunk) => {
      kind = chunk.toString('latin1').startsWith('POST /headers') ? 'headers' : 'body';
      open[kind]++;
      seen[kind]++;
      socket.write(
        kind === 'body'
          ? 'HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 100000\r\n\r\n'
          : 'HTTP/1.1 200 OK\r\nx-slow: ',
      );
      timer = setInterval(() => socket.write('a'), 1000);
    });
  });
  return {
    open,
    seen,
    listen: () =>
      new Promise<number>((resolve) =>
        server.listen(0, '127.0.0.1', () => resolve((server.address() as net.AddressInfo).port)),
      ),
    close: () => {
      for (const socket of sockets) socket.destroy();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

test('ten slow receivers of one account: another account deploys at once, and every delivery ends by its deadline', {
  skip: TEST_DATABASE !== 'postgres' && 'separate worker processes share a database only on Postgres',
}, async () => {
  const receiver = slowReceiver();
  const port = await receiver.listen();
  const env = {
    BERTH_PORT: '0',
    BERTH_SIM_STEP_MS: '50',
    BERTH_WEBHOOK_ALLOW_PRIVATE: 'true',
    // One attempt is what this test looks at: no retry comes back while it runs.
    BERTH_WEBHOOK_RETRY_BASE_MS: '600000',
  };
  const processes: BerthProcess[] = [];
  try {
    const server = await listening(servers.run(['serve', '--no-workers'], env));
    processes.push(server);
    const { url } = server;
    // Eight slots in all for jobs other than deliveries, as many as one event's deliveries could take.
    for (let i = 0; i < 2; i++) {
      const worker = servers.run(['worker', '--concurrency', '4'], { ...env, BERTH_LOG_LEVEL: 'info' });
      processes.push(worker);
      await worker.waitForOutput(/worker started/);
    }
    const slow = await firstStartOf(server);

    // The other account: its own environment and a service ready to deploy.
    const admin = (path: string, body: unknown) => api(`${url}/admin/v1${path}`, ADMIN_TOKEN, 'POST', body);
    const account = (await admin('/accounts', { name: 'other', plan: 'pro' })).body.data.account.id as string;
    const token = (await admin(`/accounts/${account}/api-tokens`, {})).body.data.api_token as string;
    const envId = (await admin(`/accounts/${account}/environments`, { name: 'other', cloud: 'aws' })).body
      .data.environment.id as string;
    const envUrl = `${url}/v1/environments/${envId}`;
    await pollUntil('the other environment to be available', async () =>
      (await api(envUrl, token)).body.data.environment.state === 'available' ? true : undefined,
    );
    const created = await api(`${envUrl}/services`, token, 'POST', {
      name: 'Prompt',
      source: 'docker_image',
      type: 'worker',
      replica_count: 1,
      cpu_count_min: 0.5,
      memory_mb_min: 128,
      docker_image: 'acme/prompt',
    });
    assert.equal(created.status, 200, JSON.stringify(created.body));

    const webhooks: { id: string; path: 'body' | 'headers' }[] = [];
    for (let i = 0; i < 10; i++) {
      // Enough that never-ending headers alone would take all eight slots, were deliveries not apart.
      const path = i < 2 ? 'body' : 'headers';
      const res = await api(`${url}/v1/webhooks`, slow.token, 'POST', {
        url: `http://127.0.0.1:${port}/${path}`,
        event_types: ['secret.created'],
      });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      webhooks.push({ id: res.body.data.webhook.id, path });
    }
    // One event, ten deliveries to receivers that never finish.
    const put = await api(`${slow.envUrl}/secrets`, slow.token, 'PUT', {
      secrets: [{ key: 'K', value: 'v' }],
    });
    assert.equal(put.status, 200, JSON.stringify(put.body));
    await pollUntil('deliveries to hang on the receivers', async () =>
      receiver.open.headers >= 2 ? true : undefined,
    );

    const deployed = await api(
      `${envUrl}/services/${created.body.data.service.id}/deploy`,
      token,
      'POST',
      {},
    );
    assert.equal(deployed.status, 200, JSON.stringify(deployed.body));
    await pollUntil(
      "the other account's deployment to succeed",
      async () => {
        const d = (await api(`${url}/v1/deployments/${deployed.body.data.deployment_id}`, token)).body.data
          .deployment;
        return d.state === 'success' ? true : undefined;
      },
      { timeoutMs: 8_000, intervalMs: 50 },
    );
    assert.ok(receiver.open.headers >= 1, 'the deployment did not wait for the slow deliveries to end');

    // Each delivery ends: a status read from the headers is enough; headers that never end hit the deadline.
    const deliveries = await pollUntil(
      'every delivery to have had its attempt',
      async () => {
        const all = await Promise.all(
          webhooks.map(async (w) => {
            const res = await api(`${url}/v1/webhooks/${w.id}/deliveries`, slow.token);
            return res.body.data.deliveries.map(
              (d: { state: string; last_error: string; attempts: number }) => ({
                path: w.path,
                state: d.state,
                last_error: d.last_error,
                attempts: d.attempts,
              }),
            );
          }),
        );
        const flat = all.flat();
        return flat.length === 10 && flat.every((d) => d.attempts >= 1) ? flat : undefined;
      },
      { timeoutMs: 90_000, intervalMs: 250 },
    );
    for (const d of deliveries) {
      if (d.path === 'body') assert.equal(d.state, 'succeeded', JSON.stringify(d));
      else assert.match(d.last_error, /no answer within 10 s/, JSON.stringify(d));
    }
    assert.deepEqual(receiver.seen, { body: 2, headers: 8 });
  } finally {
    for (const p of processes) await p.kill('SIGTERM');
    await receiver.close();
  }
});

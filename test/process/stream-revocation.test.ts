import assert from 'node:assert/strict';
import { test } from 'node:test';
import { TEST_DATABASE } from '../helpers/database.ts';
import { api, type BerthProcess } from '../helpers/process.ts';
import { serverFixture } from '../helpers/server.ts';
import { openSse } from '../helpers/sse.ts';

/**
 * A token revoked through one API process ends the streams it holds open on another, within a second:
 * the revocation's `access` notification reaches every process (Postgres LISTEN/NOTIFY).
 */
const ADMIN_TOKEN = '6f1c2d3e-4b5a-4c6d-8e7f-9a0b1c2d3e4f';
const servers = serverFixture('sim', { BERTH_ADMIN_TOKEN: ADMIN_TOKEN });

async function admin(url: string, method: string, path: string) {
  const res = await fetch(`${url}/admin/v1${path}`, {
    method,
    headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
  });
  // biome-ignore lint/suspicious/noExplicitAny: tests read JSON bodies of many shapes
  return { status: res.status, body: (await res.json()) as any };
}

test('revoking a token through one process ends its streams on another within a second', {
  skip: TEST_DATABASE === 'embedded' && 'the embedded database serves from one process only',
}, async () => {
  const holder = await servers.serve();
  const processes: BerthProcess[] = [holder];
  try {
    const { token } = await servers.firstStart(holder);
    const revoker = await servers.serve();
    processes.push(revoker);
    const accounts = await admin(revoker.url, 'GET', '/accounts');
    const accountId = accounts.body.data.accounts[0].id as string;
    const issued = await admin(revoker.url, 'POST', `/accounts/${accountId}/api-tokens`);
    const other = issued.body.data.api_token as string;
    const tokens = await admin(revoker.url, 'GET', `/accounts/${accountId}/api-tokens`);
    const tokenId = tokens.body.data.api_tokens[0].id as string;

    const streams = [
      await openSse(`${holder.url}/v1/events`, token),
      await openSse(`${holder.url}/v1/events?last_event_id=0`, token),
    ];
    const kept = await openSse(`${holder.url}/v1/events`, other);
    assert.deepEqual(
      [...streams, kept].map((s) => s.status),
      [200, 200, 200],
    );
    // The holder has looked the token up: its cache would answer for a while without the notification.
    assert.equal((await api(`${holder.url}/v1/environments`, token)).status, 200);

    const revoked = await admin(revoker.url, 'DELETE', `/api-tokens/${tokenId}`);
    assert.equal(revoked.status, 200, JSON.stringify(revoked.body));
    const at = Date.now();
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      Promise.all(streams.map((s) => s.ended)),
      new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error('the streams are still open 5 s later')), 5000);
      }),
    ]).finally(() => clearTimeout(timer));
    const ms = Date.now() - at;
    assert.ok(ms < 1000, `the streams ended ${ms} ms after the revocation`);
    assert.equal((await api(`${holder.url}/v1/environments`, token)).status, 401);

    // The account's other token keeps its stream, which still delivers.
    const envs = await api(`${holder.url}/v1/environments`, other);
    const envId = envs.body.data.environments[0].id as string;
    await api(`${revoker.url}/v1/environments/${envId}/secrets`, other, 'PUT', {
      secrets: [{ key: 'AFTER_REVOKE', value: 'x' }],
    });
    await kept.until('the event after the revocation', (got) =>
      got.some((e) => e.data.data?.key === 'AFTER_REVOKE'),
    );
    kept.close();
  } finally {
    await Promise.all(processes.map((p) => p.kill('SIGTERM')));
  }
});

test('a token a person made, revoked through one process, is refused by another within a second', {
  skip: TEST_DATABASE === 'embedded' && 'the embedded database serves from one process only',
}, async () => {
  const server = await servers.serve();
  const processes: BerthProcess[] = [server];
  try {
    const other = await servers.serve();
    processes.push(other);
    // An operator token of the account the first start made (here, or in the test above).
    const accounts = await admin(server.url, 'GET', '/accounts');
    const accountId = accounts.body.data.accounts[0].id as string;
    const issued = await admin(server.url, 'POST', `/accounts/${accountId}/api-tokens`);
    const token = issued.body.data.api_token as string;
    const made = await api(`${server.url}/v1/tokens`, token, 'POST', { name: 'ci', role: 'developer' });
    assert.equal(made.status, 200, JSON.stringify(made.body));
    const { id, token: ci } = made.body.data.token as { id: string; token: string };
    // The other process has looked the token up: its cache would answer for seconds without the notification.
    assert.equal((await api(`${other.url}/v1/environments`, ci)).status, 200);

    const revoked = await api(`${server.url}/v1/tokens/${id}`, token, 'DELETE');
    assert.equal(revoked.status, 200, JSON.stringify(revoked.body));
    const at = Date.now();
    let status = 200;
    while (status === 200 && Date.now() - at < 5000)
      status = (await api(`${other.url}/v1/environments`, ci)).status;
    const ms = Date.now() - at;
    assert.equal(status, 401);
    assert.ok(ms < 1000, `refused ${ms} ms after the revocation`);
  } finally {
    await Promise.all(processes.map((p) => p.kill('SIGTERM')));
  }
});

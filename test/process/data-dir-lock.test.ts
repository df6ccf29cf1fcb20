import assert from 'node:assert/strict';
import { test } from 'node:test';
import { pollUntil } from '../helpers/poll.ts';
import { api } from '../helpers/process.ts';
import { serverFixture } from '../helpers/server.ts';

/** The embedded database's directory lock, whatever database the rest of this run tests. */
const server = serverFixture('sim', {}, { database: 'embedded' });

test('a second process on a data directory in use refuses at once and touches nothing', async () => {
  const first = await server.serve();
  try {
    const token = (await first.waitForOutput(/API token:\s+([0-9a-f-]{36})/))[1] as string;
    // The first environment is provisioned by the worker after the start: compare once it settled.
    const before = await pollUntil('the first environment to be available', async () => {
      const res = await api(`${first.url}/v1/environments`, token);
      return res.body.data?.environments?.[0]?.state === 'available' ? res : undefined;
    });

    for (const args of [['serve'], ['migrate']]) {
      const second = server.run(args, { BERTH_PORT: '0' });
      assert.equal(await second.exited, 2, `berth ${args[0]} should exit with 2`);
      assert.match(second.stderr(), /data directory .* is in use by another Berth process \(pid \d+\)/);
      assert.doesNotMatch(second.stderr(), /\n\s+at /, 'no stack trace');
    }

    // The first server still serves the same data.
    const afterwards = await api(`${first.url}/v1/environments`, token);
    assert.deepEqual(afterwards.body, before.body);
    const write = await api(
      `${first.url}/v1/environments/${before.body.data.environments[0].id}/secrets`,
      token,
      'PUT',
      {
        secrets: [{ key: 'STILL', value: 'fine' }],
      },
    );
    assert.equal(write.status, 200);
  } finally {
    // Stopped whatever failed above: a server left running would keep this file from ending.
    assert.equal(await first.kill('SIGTERM'), 0);
  }
});

test('the lock does not outlive a killed process', async () => {
  const first = await server.serve();
  assert.equal(await first.kill('SIGKILL'), 'SIGKILL');
  const second = await server.serve();
  assert.match(second.url, /^http:/);
  assert.equal(await second.kill('SIGTERM'), 0);
});

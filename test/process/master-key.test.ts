import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { serverFixture } from '../helpers/server.ts';

/** Every process of an installation must hold the key its secrets are sealed with, or refuse to start. */
const server = serverFixture('sim');

const keyA = randomBytes(32).toString('hex');
const keyB = randomBytes(32).toString('hex');
const env = (key: string) => ({ BERTH_MASTER_KEY: key });

test('a process with another master key refuses at once; with the old key among its keys it starts, and from then on every process needs the new key', async () => {
  const first = await server.serve(env(keyA));
  assert.equal(await first.kill('SIGTERM'), 0);

  const stranger = server.run(['serve'], { ...env(keyB), BERTH_PORT: '0' });
  assert.equal(await stranger.exited, 2);
  assert.match(
    stranger.stderr(),
    /^berth: this database's secrets are sealed with the master key [0-9a-f]{12}, which this process does not have/,
  );
  assert.match(stranger.stderr(), /Give every Berth process the same BERTH_MASTER_KEY/);

  // Rotation: the new key first seals, the old one still opens.
  const rotated = await server.serve(env(`${keyB},${keyA}`));
  assert.match(rotated.url, /^http:/);
  assert.equal(await rotated.kill('SIGTERM'), 0);

  // That process recorded the new key before sealing with it: a process with only the old key now refuses.
  const behind = server.run(['serve'], { ...env(keyA), BERTH_PORT: '0' });
  assert.equal(await behind.exited, 2);
  assert.match(behind.stderr(), /sealed with the master key [0-9a-f]{12}, which this process does not have/);
});

test('a start without BERTH_MASTER_KEY on a database sealed with another key refuses, and leaves no generated key behind', async () => {
  // The test above left the database sealed with keyB and keyA, and no key in the data directory.
  const keyFile = path.join(server.database.dataDir, 'master.key');
  assert.equal(fs.existsSync(keyFile), false);

  const keyless = server.run(['serve'], { BERTH_MASTER_KEY: '', BERTH_PORT: '0' });
  assert.equal(await keyless.exited, 2);
  assert.match(keyless.stderr(), /which this process does not have/);
  assert.equal(
    fs.existsSync(keyFile),
    false,
    'a wrong generated key would be taken for the right one next time',
  );

  // Given the keys, it starts as before.
  const given = await server.serve(env(`${keyB},${keyA}`));
  assert.equal(await given.kill('SIGTERM'), 0);
});

import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';
import { assertEachTickRunOnce, deployTicker } from '../helpers/cron-ticks.ts';
import { TEST_DATABASE } from '../helpers/database.ts';
import { freePort } from '../helpers/docker.ts';
import { serverFixture } from '../helpers/server.ts';

/**
 * Two `berth serve` processes on one Postgres database and one Docker engine (each with its own data
 * directory and ingress) both schedule a cron service: each tick runs once. Two Berth processes share a
 * database only on Postgres: package.json's test:docker runs this file once more with
 * BERTH_TEST_DATABASE=postgres.
 */
const servers = serverFixture('docker', {
  // One installation: every process holds the key its secrets are sealed with.
  BERTH_MASTER_KEY: randomBytes(32).toString('hex'),
  // The cron scheduler says which process ran a tick and which found it taken (debug).
  BERTH_LOG_LEVEL: 'debug',
});
const dataDirs: string[] = [];
after(() => {
  for (const dir of dataDirs) fs.rmSync(dir, { recursive: true, force: true });
});

test('a cron tick runs once with two berth serve processes scheduling it (docker)', {
  skip: TEST_DATABASE !== 'postgres' && 'two Berth processes share a Postgres database, not the embedded one',
}, async () => {
  const { berth: first, token, envUrl } = await servers.start();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-docker-second-'));
  dataDirs.push(dir);
  const second = await servers.serve({ BERTH_DATA_DIR: dir, BERTH_INGRESS_PORT: String(await freePort()) });
  const id = await deployTicker(first, { envUrl, token }, { docker_image: 'berth-test/busybox' });
  await assertEachTickRunOnce(first, second, id);
});

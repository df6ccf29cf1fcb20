import assert from 'node:assert/strict';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { readBackupFile } from '../../src/store/backup-file.ts';
import { TEST_DATABASE } from '../helpers/database.ts';
import { pollUntil } from '../helpers/poll.ts';
import { api, firstStartOf, runBerth } from '../helpers/process.ts';
import { serverFixture } from '../helpers/server.ts';
import { openSse, type SseEvent } from '../helpers/sse.ts';

/**
 * `berth admin backup` / `restore` and BERTH_BACKUP_SCHEDULE as an operator runs them (docs/operations.md,
 * "Backups"): a backup of the running server, SIGKILLed at any moment, never leaves a file named as
 * complete; a restore needs the master key it was taken with, names it when it is missing, and the
 * restored server answers as the old one; scheduled backups keep BERTH_BACKUP_KEEP and log why one failed.
 */
const ADMIN_TOKEN = 'c3d2e1f0-8a43-4b5e-9d7e-2f3c1f2a9c10';
const servers = serverFixture('sim', { BERTH_ADMIN_TOKEN: ADMIN_TOKEN });
const dirs: string[] = [];
after(() => {
  for (const dir of dirs) fs.rmSync(dir, { recursive: true, force: true });
});

function tempDir() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-backups-'));
  dirs.push(dir);
  return dir;
}

/** Every file under a final name in `dir` is a whole backup that checks out. */
async function assertOnlyCompleteBackups(dir: string): Promise<string[]> {
  const named = fs.readdirSync(dir).filter((name) => !name.startsWith('.'));
  for (const name of named) await readBackupFile(path.join(dir, name));
  return named;
}

test('a backup through the running server, killed at any moment, never leaves a partial file named as complete; the restore needs the master key', async () => {
  const source = await servers.another();
  const server = await source.serve();
  const dir = tempDir();
  let token: string;
  let environments: unknown;
  try {
    ({ token } = await firstStartOf(server));
    const secret = await api(`${server.url}/v1/environments`, token);
    const envId = secret.body.data.environments[0].id;
    assert.equal(
      (
        await api(`${server.url}/v1/environments/${envId}/secrets`, token, 'PUT', {
          secrets: [{ key: 'KEPT', value: 'kept-value' }],
        })
      ).status,
      200,
    );
    environments = (await api(`${server.url}/v1/environments`, token)).body;
    const backup = (...args: string[]) =>
      runBerth(['admin', '--url', server.url, '-o', 'json', 'backup', ...args], {
        BERTH_ADMIN_TOKEN: ADMIN_TOKEN,
      });

    // Killed at moments spread over a backup's life (not a wait for anything): before the request,
    // while the server spools, while the file is written, after.
    for (const delayMs of [0, 5, 20, 50, 100, 200, 400]) {
      const killed = backup(dir);
      await sleep(delayMs);
      await killed.kill('SIGKILL');
      await assertOnlyCompleteBackups(dir);
    }
    const kept = backup(dir);
    assert.equal(await kept.exited, 0, kept.stderr());
    const written = JSON.parse(kept.stdout()).backup;
    assert.equal(path.dirname(written.file), dir);
    assert.match(path.basename(written.file), /^berth-backup-.*\.ndjson\.gz$/);
    assert.equal(fs.statSync(written.file).mode & 0o777, 0o600, 'a backup holds sealed secrets: owner only');
    assert.equal(written.migration, (await readBackupFile(written.file)).manifest.migration);
    assert.ok((await assertOnlyCompleteBackups(dir)).includes(path.basename(written.file)));

    // An existing file is never overwritten.
    const again = backup(written.file);
    assert.equal(await again.exited, 2);
    assert.match(again.stderr(), /exists: name another file/);
    // A directory that is not there is named before the server takes a snapshot; `dir/` is never a file
    // called dir.
    const missing = path.join(dir, 'not-yet');
    for (const name of [`${missing}/`, path.join(missing, 'backup.ndjson.gz')]) {
      const refused = backup(name);
      assert.equal(await refused.exited, 2);
      assert.equal(refused.stderr(), `berth: no directory ${missing}: create it first\n`);
    }
    assert.equal(fs.existsSync(missing), false);

    const target = await servers.another();
    const restore = (extra: Record<string, string>) =>
      target.run(['admin', '-o', 'json', 'restore', written.file], extra);
    const keyless = restore({ BERTH_MASTER_KEY: '' });
    assert.equal(await keyless.exited, 2);
    assert.match(keyless.stderr(), /^berth: no master key: .*Set BERTH_MASTER_KEY/);
    assert.doesNotMatch(keyless.stderr(), /\n\s+at /, 'one line, no stack');

    const key = fs.readFileSync(path.join(source.database.dataDir, 'master.key'), 'utf8').trim();
    const restored = restore({ BERTH_MASTER_KEY: key });
    assert.equal(await restored.exited, 0, restored.stderr());
    assert.equal(JSON.parse(restored.stdout()).restored.migration, written.migration);
    await server.kill('SIGTERM');

    const revived = await target.serve({ BERTH_MASTER_KEY: key });
    try {
      assert.deepEqual((await api(`${revived.url}/v1/environments`, token)).body, environments);
      const values = (await api(`${revived.url}/v1/environments/${envId}/secrets`, token)).body.data.secrets;
      assert.deepEqual(
        values.map((s: { key: string; value: string }) => [s.key, s.value]),
        [['KEPT', 'kept-value']],
      );
    } finally {
      await revived.kill('SIGTERM');
    }
  } finally {
    await server.kill('SIGTERM');
  }
});

test('scheduled backups: a failure is logged with its reason and opens the backup_failed alert; every tick then writes one, the alert resolves, retention keeps BERTH_BACKUP_KEEP', async () => {
  const db = await servers.another();
  const parent = tempDir();
  const target = path.join(parent, 'backups');
  // Not a directory yet: the backups fail, and say why.
  fs.writeFileSync(target, '');
  const server = await db.serve({
    BERTH_BACKUP_SCHEDULE: '* * * * * *',
    BERTH_BACKUP_DIR: target,
    BERTH_BACKUP_KEEP: '2',
    BERTH_METRICS_BIND: '127.0.0.1:0',
  });
  try {
    const metricsUrl = (await server.waitForOutput(/Metrics: (http:\/\/\S+)/))[1] as string;
    const { token } = await firstStartOf(server);
    // From the oldest event kept: the alert may have opened before the stream does.
    const stream = await openSse(`${server.url}/v1/events`, token, { 'last-event-id': '0' });
    await server.waitForOutput(
      /"msg":"scheduled backup failed: BERTH_BACKUP_DIR [^"]* is not a directory/,
      30_000,
    );
    const alerts = (events: SseEvent[]) => events.filter((e) => e.data.data?.rule === 'backup_failed');
    const [opened] = alerts(await stream.until('the backup_failed alert', (e) => alerts(e).length > 0));
    assert.equal(opened?.event, 'alert.opened');
    assert.equal(opened?.data.data.state, 'open');
    assert.equal(opened?.data.data.service_id, null);
    assert.match(
      opened?.data.data.message,
      /^Berth's scheduled backup of its own state failed: BERTH_BACKUP_DIR .* is not a directory/,
    );
    fs.rmSync(target);
    // A tick may make it first (a backup makes its directory): that one is a good backup too.
    fs.mkdirSync(target, { recursive: true });
    // The next good backup resolves it; the failures in between (one a second) opened no other.
    await stream.until('the backup_failed alert to resolve', (e) =>
      alerts(e).some((a) => a.event === 'alert.resolved'),
    );
    stream.close();
    const transitions = alerts(stream.events);
    assert.deepEqual(
      transitions.map((a) => [a.event, a.data.data.id, a.data.data.state]),
      [
        ['alert.opened', opened?.data.data.id, 'open'],
        ['alert.resolved', opened?.data.data.id, 'resolved'],
      ],
    );
    assert.equal(transitions[1]?.data.data.message, opened?.data.data.message, 'the reason stays on it');
    const seen = new Set<string>();
    await pollUntil(
      'three scheduled backups, two kept',
      async () => {
        const names = await assertOnlyCompleteBackups(target).catch(() => []);
        for (const name of names) seen.add(name);
        return seen.size >= 3 && names.length === 2 ? true : undefined;
      },
      { timeoutMs: 60_000, intervalMs: 100 },
    );
    // What to alert on: failures counted, and when the last backup was written.
    const metrics = await (await fetch(metricsUrl)).text();
    assert.match(metrics, /^berth_backups_total\{outcome="failed"\} [1-9]/m);
    assert.match(metrics, /^berth_backups_total\{outcome="written"\} [1-9]/m);
    const written = Number(/^berth_backup_last_written_timestamp_seconds (\S+)/m.exec(metrics)?.[1]);
    assert.ok(Math.abs(written - Date.now() / 1000) < 60, `last written ${written}`);
  } finally {
    await server.kill('SIGTERM');
  }
});

test('scheduled backups into a bucket: the start names the bucket as their target, a failed upload says why', async () => {
  const db = await servers.another();
  // A closed port: the upload fails at once, with the reason.
  const closed = await new Promise<number>((resolve) => {
    const probe = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as net.AddressInfo;
      probe.close(() => resolve(port));
    });
  });
  const server = await db.serve({
    BERTH_BACKUP_SCHEDULE: '* * * * * *',
    BERTH_BACKUP_S3_URL: 's3://acme-backups/berth/',
    BERTH_BACKUP_S3_ENDPOINT: `http://127.0.0.1:${closed}`,
    AWS_ACCESS_KEY_ID: 'berth-test',
    AWS_SECRET_ACCESS_KEY: 'berth-test-secret',
    BERTH_LOG_LEVEL: 'info',
  });
  try {
    await server.waitForOutput(/"target":"s3:\/\/acme-backups\/berth\/"[^\n]*"msg":"backups scheduled"/);
    await server.waitForOutput(
      /"msg":"scheduled backup failed: s3:\/\/acme-backups\/berth\/: connect ECONNREFUSED/,
      30_000,
    );
  } finally {
    await server.kill('SIGTERM');
  }
});

test('several processes on one database: each scheduled tick is taken by one of them', {
  skip: TEST_DATABASE !== 'postgres' && 'the embedded database has one process',
}, async () => {
  const db = await servers.another();
  const dirs = [tempDir(), tempDir()];
  const schedule = { BERTH_BACKUP_SCHEDULE: '* * * * * *', BERTH_BACKUP_KEEP: '1000' };
  const first = await db.serve({ ...schedule, BERTH_BACKUP_DIR: dirs[0] as string });
  try {
    const second = await db.serve({ ...schedule, BERTH_BACKUP_DIR: dirs[1] as string });
    try {
      const ticks = await pollUntil(
        'eight ticks taken',
        async () => {
          const names = dirs.flatMap((dir) => fs.readdirSync(dir).filter((n) => !n.startsWith('.')));
          return names.length >= 8 ? names : undefined;
        },
        { timeoutMs: 60_000, intervalMs: 100 },
      );
      assert.equal(new Set(ticks).size, ticks.length, `a tick taken twice: ${ticks.sort().join(', ')}`);
    } finally {
      await second.kill('SIGTERM');
    }
  } finally {
    await first.kill('SIGTERM');
  }
});

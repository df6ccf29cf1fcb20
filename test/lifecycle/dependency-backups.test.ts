import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { Value } from 'typebox/value';
import { Event } from '../../src/api/schemas/events.ts';
import { eventView } from '../../src/domain/usecases/projections.ts';
import { scheduleDependencyBackups } from '../../src/jobs/dependency-backup-schedule.ts';
import { dependencyRestoreHandler } from '../../src/jobs/handlers/dependency-backups.ts';
import type { DependencyBackups } from '../../src/providers/provider.ts';
import { simTables } from '../../src/providers/sim/tables.ts';
import { changeBackup } from '../../src/store/repositories/dependency-backups.ts';
import type { JobRow } from '../../src/store/schema.ts';
import { type Harness, startHarness, type Tenant, VALID_SERVICE } from '../helpers/harness.ts';
import { claimHeldByTest } from '../helpers/jobs.ts';
import { pollUntil } from '../helpers/poll.ts';

/**
 * Dependency backups on the simulated cloud, through the API: take one, its states, a failure (with its
 * event), retention, restore (force when in use), the schedule, and what is refused.
 */
let h: Harness;
let t: Tenant;
let serviceId: string;
before(async () => {
  h = await startHarness({ dependencyBackupKeep: 3 });
  await h.startWorker();
  t = await h.tenant();
  const ops = {
    dependencies: {
      rds: {
        instances: [
          { id: 'pg', prefix: 'pgdata', engine: 'postgres', exports: { DB: '$endpoint' } },
          { id: 'maria', engine: 'mariadb', exports: { MARIA: '$endpoint' } },
          { id: 'failbackup-db', prefix: 'brokenbackup', exports: { BAD: '$endpoint' } },
          { id: 'kept', backup_keep: 2, exports: { KEPT: '$endpoint' } },
          { id: 'off', backups: false, exports: { OFF: '$endpoint' } },
        ],
      },
      elasticache: { clusters: [{ id: 'cache', exports: { REDIS: '$endpoint' } }] },
      s3: { buckets: [{ id: 'files', exports: { BUCKET: '$name' } }] },
    },
  };
  const created = await h.request('POST', `/v1/environments/${t.envId}/services`, {
    token: t.token,
    body: { ...VALID_SERVICE.docker, ops_json: JSON.stringify(ops) },
  });
  assert.equal(created.status, 200, created.raw);
  serviceId = created.body.data.service.id;
  const deploy = await h.request('POST', `/v1/environments/${t.envId}/services/${serviceId}/deploy`, {
    token: t.token,
    body: {},
  });
  assert.equal(deploy.status, 200, deploy.raw);
  await pollUntil('the deployment to succeed', async () => {
    const d = await h.request('GET', `/v1/deployments/${deploy.body.data.deployment_id}`, { token: t.token });
    assert.notEqual(d.body.data.deployment.state, 'failed', d.raw);
    return d.body.data.deployment.state === 'success' ? true : undefined;
  });
});
after(() => h.close());

// biome-ignore lint/suspicious/noExplicitAny: JSON bodies
type Json = Record<string, any>;
const backupsUrl = (dependency: string) =>
  `/v1/environments/${t.envId}/services/${serviceId}/dependencies/${encodeURIComponent(dependency)}/backups`;

async function list(dependency: string): Promise<Json[]> {
  const res = await h.request('GET', backupsUrl(dependency), { token: t.token });
  assert.equal(res.status, 200, res.raw);
  return res.body.data.backups;
}

async function create(dependency: string): Promise<Json> {
  const res = await h.request('POST', backupsUrl(dependency), { token: t.token, body: {} });
  assert.equal(res.status, 200, res.raw);
  return res.body.data.backup;
}

/** The backup once it ended (completed or failed). */
async function ended(dependency: string, id: string): Promise<Json> {
  return pollUntil(`backup ${id} to end`, async () => {
    const found = (await list(dependency)).find((b) => b.id === id);
    return found && (found.state === 'completed' || found.state === 'failed') ? found : undefined;
  });
}

async function simCalls(operation: string): Promise<{ subject_id: string; outcome: string | null }[]> {
  return simTables(h.deps.store.db)
    .selectFrom('sim_calls')
    .select(['subject_id', 'outcome'])
    .where('operation', '=', operation)
    .orderBy('id')
    .execute();
}

describe('dependency backups on the simulated cloud', () => {
  let pgBackup: Json;

  test('a backup asked for is pending at once, then completes with a size (postgres and mariadb)', async () => {
    assert.deepEqual(await list('pg'), []);
    for (const dependency of ['pg', 'maria']) {
      const backup = await create(dependency);
      assert.equal(backup.state, 'pending');
      assert.equal(backup.trigger, 'manual');
      assert.equal(backup.size_bytes, null);
      assert.equal(backup.completed_at, null);
      assert.equal(backup.restore, null);
      const done = await ended(dependency, backup.id);
      assert.equal(done.state, 'completed', done.error);
      assert.ok(done.size_bytes >= 1_048_576, `a plausible size: ${done.size_bytes}`);
      assert.ok(Date.parse(done.completed_at) >= Date.parse(done.created_at));
      assert.equal(done.error, '');
      if (dependency === 'pg') pgBackup = done;
    }
    // Also by its qualified name.
    assert.deepEqual(
      (await list('rds.instances.pg')).map((b) => b.id),
      [pgBackup.id],
    );
  });

  test('a redis cluster is backed up too; buckets and unknown dependencies are not', async () => {
    const cache = await ended('cache', (await create('cache')).id);
    assert.equal(cache.state, 'completed');
    const bucket = await h.request('POST', backupsUrl('files'), { token: t.token, body: {} });
    assert.equal(bucket.status, 409, bucket.raw);
    assert.match(bucket.body.message, /s3 buckets have no backups/);
    for (const unknown of ['nope', randomUUID(), 'rds.instances.nope']) {
      const res = await h.request('GET', backupsUrl(unknown), { token: t.token });
      assert.equal(res.status, 404, res.raw);
      assert.deepEqual(res.body, { error_code: 'notfound', message: 'Dependency not found', errors: null });
    }
  });

  test('a backup the target refuses fails with the reason, as an event; the good ones stay', async () => {
    const backup = await create('failbackup-db');
    const done = await ended('failbackup-db', backup.id);
    assert.equal(done.state, 'failed');
    assert.match(done.error, /backup target is full/);
    const events = await h.deps.store.db
      .selectFrom('events')
      .selectAll()
      .where('account_id', '=', t.accountId)
      .where('type', '=', 'dependency_backup.updated')
      .orderBy('seq')
      .execute();
    const failed = events
      .map((e) => eventView(e).data as Json)
      .filter((d) => d.id === backup.id && d.state === 'failed');
    assert.equal(failed.length, 1);
    assert.match(String(failed[0]?.error), /backup target is full/);
    for (const e of events) assert.ok(Value.Check(Event, eventView(e)), 'events match the schema');

    // A backup of pg that fails (the target refuses it once) deletes none of pg's completed backups.
    const backups = h.deps.provider.backups as DependencyBackups;
    const real = backups.backup;
    backups.backup = async () => {
      throw new (await import('../../src/jobs/errors.ts')).TerminalError('no space left on device');
    };
    try {
      const refused = await ended('pg', (await create('pg')).id);
      assert.equal(refused.state, 'failed');
      assert.equal(refused.error, 'no space left on device');
    } finally {
      backups.backup = real;
    }
    const pg = await list('pg');
    assert.deepEqual(
      pg.filter((b) => b.state === 'completed').map((b) => b.id),
      [pgBackup.id],
    );
  });

  test('retention keeps the newest N completed backups (backup_keep), discarding the rest', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      const backup = await create('kept');
      ids.push(backup.id);
      assert.equal((await ended('kept', backup.id)).state, 'completed');
    }
    const kept = await pollUntil('retention to apply', async () => {
      const now = await list('kept');
      return now.length === 2 ? now : undefined;
    });
    assert.deepEqual(
      kept.map((b) => b.id),
      [ids[2], ids[1]],
    );
    const discarded = await simCalls('discard_backup');
    assert.ok(
      discarded.some((c) => c.subject_id === ids[0]),
      'the oldest file was discarded',
    );
  });

  test('restoring a dependency in use needs force, and stops its service for the duration', async () => {
    const url = `${backupsUrl('pg')}/${pgBackup.id}/restore`;
    const refused = await h.request('POST', url, { token: t.token, body: {} });
    assert.equal(refused.status, 409, refused.raw);
    assert.match(refused.body.message, /in use by service .*"force": true/);

    const res = await h.request('POST', url, { token: t.token, body: { force: true } });
    assert.equal(res.status, 200, res.raw);
    const { restore } = res.body.data.backup;
    assert.equal(restore.state, 'pending');
    assert.deepEqual(restore.stopped_services, [serviceId]);
    assert.equal(restore.into, 'same');
    assert.deepEqual(restore.attributes, {});
    const again = await h.request('POST', url, { token: t.token, body: { force: true } });
    assert.equal(again.status, 409, 'one restore at a time');

    const done = await pollUntil('the restore to end', async () => {
      const b = (await list('pg')).find((x) => x.id === pgBackup.id);
      return b?.restore?.state === 'completed' || b?.restore?.state === 'failed' ? b : undefined;
    });
    assert.equal(done.restore.state, 'completed', done.restore.error);
    assert.ok(done.restore.completed_at);
    const calls = await simCalls('restore_dependency');
    assert.match(calls.at(-1)?.outcome ?? '', new RegExp(`stopped ${serviceId}`));
  });

  test('a restore into a new dependency needs no force, stops nothing, and names the copy', async () => {
    const url = `${backupsUrl('pg')}/${pgBackup.id}/restore`;
    const res = await h.request('POST', url, { token: t.token, body: { into: 'new' } });
    assert.equal(res.status, 200, res.raw);
    assert.equal(res.body.data.backup.restore.into, 'new');
    assert.deepEqual(res.body.data.backup.restore.stopped_services, []);
    const done = await pollUntil('the restore to end', async () => {
      const b = (await list('pg')).find((x) => x.id === pgBackup.id);
      return b?.restore?.state === 'completed' || b?.restore?.state === 'failed' ? b : undefined;
    });
    assert.equal(done.restore.state, 'completed', done.restore.error);
    assert.match(done.restore.attributes.address, /^pgdata-restore-[0-9a-f]{8}\./);
    assert.ok(!('password' in done.restore.attributes));
    const calls = await simCalls('restore_dependency');
    assert.equal(calls.at(-1)?.outcome, 'restored into new; stopped nothing');
    const bad = await h.request('POST', url, { token: t.token, body: { into: 'elsewhere' } });
    assert.equal(bad.status, 422, bad.raw);
  });

  test('a restore whose job gives up (its workers kept dying) starts the services it held again, unless another restore holds them', async () => {
    const handler = dependencyRestoreHandler(h.deps);
    const db = h.deps.store.db;
    // As a killed attempt leaves it: running, the service stopped; no job, so no worker runs it here.
    const held = async (id: string) => {
      assert.ok(
        await changeBackup(db, id, {
          restore_state: 'running',
          restore_into: 'same',
          restore_stopped_services: [serviceId],
        }),
      );
      return { subject_id: id } as JobRow;
    };
    const releases = async () =>
      (await simCalls('release_restore_hold')).filter((c) => c.subject_id === t.envId);

    await handler.fail(await held(pgBackup.id), 'its worker stopped every time', claimHeldByTest);
    assert.deepEqual(
      (await releases()).map((c) => c.outcome),
      [`started ${serviceId}`],
    );
    const failed = (await list('pg')).find((b) => b.id === pgBackup.id);
    assert.equal(failed?.restore?.state, 'failed');
    assert.equal(failed?.restore?.error, 'its worker stopped every time');

    // Another restore of the service's dependencies is under way: it starts the service at its end.
    const maria = (await list('maria'))[0] as Json;
    await held(maria.id);
    await handler.fail(await held(pgBackup.id), 'its worker stopped every time', claimHeldByTest);
    assert.equal((await releases()).length, 1, 'nothing released while another restore holds it');
    await handler.fail({ subject_id: maria.id } as JobRow, 'its worker stopped every time', claimHeldByTest);
    assert.equal((await releases()).length, 2, 'the last restore to end releases it');
  });

  test('a failed or unknown backup is not restored', async () => {
    const failed = (await list('failbackup-db'))[0] as Json;
    const res = await h.request('POST', `${backupsUrl('failbackup-db')}/${failed.id}/restore`, {
      token: t.token,
      body: { force: true },
    });
    assert.equal(res.status, 409, res.raw);
    assert.match(res.body.message, /is failed: only a completed backup can be restored/);
    for (const id of [randomUUID(), 'not-a-uuid']) {
      const missing = await h.request('POST', `${backupsUrl('pg')}/${id}/restore`, {
        token: t.token,
        body: { force: true },
      });
      assert.equal(missing.status, 404, missing.raw);
      assert.equal(missing.body.message, 'Backup not found');
    }
    // Another dependency's backup is not this one's.
    const other = await h.request('POST', `${backupsUrl('maria')}/${pgBackup.id}/restore`, {
      token: t.token,
      body: { force: true },
    });
    assert.equal(other.status, 404, other.raw);
  });

  test('the schedule backs up every database and cache once per interval, never those turned off', async () => {
    assert.equal(await scheduleDependencyBackups(h.deps, 3_600_000), 0, 'none made an hour ago');
    // Made more than an interval of 4 s ago: each is due once.
    const interval = 4_000;
    // They were made one after the other: each becomes due in turn. Two processes look at once (two
    // calls in parallel): each due backup is scheduled by one of them.
    let scheduled = 0;
    await pollUntil('the dependencies to be due', async () => {
      const counts = await Promise.all([
        scheduleDependencyBackups(h.deps, interval),
        scheduleDependencyBackups(h.deps, interval),
      ]);
      scheduled += counts[0] + counts[1];
      return scheduled >= 5 ? true : undefined;
    });
    assert.equal(scheduled, 5, 'pg, maria, failbackup-db, kept, cache');
    assert.equal(await scheduleDependencyBackups(h.deps, interval), 0, 'not again within the interval');
    const rows = await h.deps.store.db
      .selectFrom('dependency_backups')
      .select(['resource_id'])
      .where('service_id', '=', serviceId)
      .where('trigger', '=', 'scheduled')
      .execute();
    assert.deepEqual(
      rows.map((r) => r.resource_id).sort(),
      ['cache', 'failbackup-db', 'kept', 'maria', 'pg'],
      'one scheduled backup each',
    );
    const off = await list('off');
    assert.deepEqual(off, []);
    const pg = await pollUntil('the scheduled pg backup to complete', async () => {
      const found = (await list('pg')).find((b) => b.trigger === 'scheduled');
      return found?.state === 'completed' ? found : undefined;
    });
    assert.ok(pg.size_bytes > 0);
    // Only completed backups count for retention (3 here): pg has at most 3 completed.
    assert.ok((await list('pg')).filter((b) => b.state === 'completed').length <= 3);
  });
});

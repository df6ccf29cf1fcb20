import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import zlib from 'node:zlib';
import { sql } from 'kysely';
import { loadConfig } from '../../src/config.ts';
import { SOURCES } from '../../src/domain/service-fields.ts';
import { claimScheduledBackup, scheduledBackup, takeBackup } from '../../src/domain/usecases/backups.ts';
import { restoreBackup } from '../../src/restore.ts';
import { isEmptyDatabase } from '../../src/store/backup.ts';
import { readBackupFile } from '../../src/store/backup-file.ts';
import { openStore } from '../../src/store/database.ts';
import { appliedMigrations, KNOWN_MIGRATIONS, migrateToLatest } from '../../src/store/migrate.ts';
import { SecretBox } from '../../src/store/secret-box.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/database.ts';
import { captureVariables } from '../helpers/deployments.ts';
import { ADMIN_TOKEN, type Harness, startHarness, type Tenant, VALID_SERVICE } from '../helpers/harness.ts';
import { HOSTED_EXAMPLE } from '../helpers/ops-json-examples.ts';
import { pollUntil } from '../helpers/poll.ts';

/**
 * Backups of Berth's own state (docs/operations.md, "Backups"): a rich state backed up through
 * GET /admin/v1/backup, its database destroyed, restored into a fresh one, answers every /v1 and
 * /admin/v1 read byte for byte as before, and a secret still reaches the runtime. A restore refuses a
 * damaged file, a newer schema, the wrong master key and a target that is not empty, before writing.
 */
const KEY = randomBytes(32).toString('hex');
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-backup-test-'));
const file = path.join(dir, 'state.ndjson.gz');
const settings = { masterKey: KEY, webhookAllowPrivate: true, rateLimitPerMin: 1_000_000 };
const cleanups: (() => Promise<void>)[] = [];
after(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
  fs.rmSync(dir, { recursive: true, force: true });
});

const configOf = (db: TestDatabase, masterKey = KEY) => ({
  ...loadConfig({}),
  databaseUrl: db.databaseUrl,
  dataDir: db.dataDir,
  masterKey,
});

/**
 * Reads that show no state of Berth's, left out (docs/operations.md lists them): the changes from now
 * on (events), the runtime's own logs (what the provider's workloads print, up to now), the API's
 * description; and the backup itself, a password read that needs an ARN (it is audited: a write), and a
 * device login's request, read by the code only its CLI and its person hold for ten minutes.
 */
const NOT_STATE = [
  '/v1/events',
  '/v1/environments/:envId/services/:serviceId/logs',
  '/v1/openapi.json',
  '/admin/v1/backup',
  '/admin/v1/dependency-passwords',
  '/v1/device-logins/:userCode',
];

/** Reads whose default window ends now are asked for a fixed one (what is in it is state). */
const WINDOW = `from=${new Date(Date.now() - 3_600_000).toISOString()}&to=${new Date(Date.now() + 3_600_000).toISOString()}`;
const QUERIES: Record<string, string> = {
  '/v1/environments/:envId/services/:serviceId/metrics': `?${WINDOW}`,
};

/** Every GET under /v1 and /admin/v1 the app has, for each resource of each tenant: path -> raw body. */
async function readEverything(h: Harness, tenants: Tenant[]): Promise<Map<string, string>> {
  const reads = new Map<string, string>();
  const get = async (url: string, token: string) => {
    // A refusal is a read too (a plan without custom domains answers 403, before and after), and so is
    // an account's single sign-on that is not set (404).
    const res = await h.request('GET', url, { token });
    assert.ok(
      res.status === 200 || res.status === 403 || (res.status === 404 && url === '/v1/sso'),
      `${url}: ${res.status} ${res.raw}`,
    );
    reads.set(url, `${res.status} ${res.raw}`);
    return res.body.data;
  };
  const routes = h.routes
    .filter((r) => r.method === 'GET' && /^\/(admin\/)?v1\//.test(r.url))
    .filter((r) => !NOT_STATE.includes(r.url));
  const ids: Record<string, string[]> = { id: [] };
  for (const t of tenants) {
    ids.id?.push(t.accountId);
    const services = (await get(`/v1/environments/${t.envId}/services`, t.token)).services as {
      id: string;
    }[];
    const deployments: string[] = [];
    for (const s of services) {
      const list = await get(`/v1/environments/${t.envId}/services/${s.id}/deployments`, t.token);
      deployments.push(...(list.deployments as { id: string }[]).map((d) => d.id));
    }
    const webhooks = ((await get('/v1/webhooks', t.token)).webhooks as { id: string }[]).map((w) => w.id);
    const values: Record<string, string[]> = {
      envId: [t.envId],
      deploymentId: deployments,
      webhookId: webhooks,
    };
    // Paths under one service take that service's own dependencies.
    const perService: Record<string, string[]>[] = [];
    for (const s of services) {
      const url = `/v1/environments/${t.envId}/services/${s.id}/dependencies`;
      const dependencies = ((await get(url, t.token)).dependencies as { id: string; kind: string }[])
        .filter((d) => d.kind === 'rds' || d.kind === 'elasticache')
        .map((d) => d.id);
      perService.push({ serviceId: [s.id], dependencyId: dependencies });
    }
    for (const route of routes.filter((r) => r.url.startsWith('/v1/'))) {
      const names = [...route.url.matchAll(/:(\w+)/g)].map((m) => m[1] as string);
      const scopes = names.includes('serviceId') ? perService : [{}];
      for (const scope of scopes) {
        let urls = [route.url + (QUERIES[route.url] ?? '')];
        for (const name of names) {
          const options = scope[name] ?? values[name];
          assert.ok(options, `${route.url}: the round trip does not know the parameter :${name}`);
          urls = urls.flatMap((u) => options.map((v) => u.replace(`:${name}`, v)));
        }
        for (const url of urls) await get(url, t.token);
      }
    }
  }
  for (const route of routes.filter((r) => r.url.startsWith('/admin/'))) {
    const urls = route.url.includes(':id')
      ? (ids.id ?? []).map((id) => route.url.replace(':id', id))
      : [route.url];
    for (const url of urls) await get(url, ADMIN_TOKEN);
  }
  return reads;
}

let tenants: Tenant[];
let before_: Map<string, string>;
let docker: { envId: string; serviceId: string; token: string };
let restored: TestDatabase;

before(async () => {
  const h = await startHarness(settings);
  let closed = false;
  cleanups.push(async () => {
    if (!closed) await h.close();
  });
  const worker = await h.startWorker();
  const a = await h.tenant();
  const b = await h.tenant({ plan: 'starter', cloud: 'gcp' });
  tenants = [a, b];
  const ok = async (method: string, url: string, t: Tenant, body?: unknown) => {
    const res = await h.request(method, url, { token: t.token, body });
    assert.equal(res.status, 200, `${method} ${url}: ${res.raw}`);
    return res.body.data;
  };
  const github = await h.gitConnection(a, 'github');
  const gitlab = await h.gitConnection(a, 'gitlab');
  await ok('PUT', `/v1/environments/${a.envId}/secrets`, a, {
    secrets: [
      { key: 'SHARED_TOKEN', value: 'shared-value', is_sensitive: true },
      { key: 'REGION', value: 'eu', is_sensitive: false },
    ],
  });
  const services = `/v1/environments/${a.envId}/services`;
  const web = await ok('POST', services, a, {
    ...VALID_SERVICE.docker,
    ops_json: JSON.stringify({ dependencies: { rds: HOSTED_EXAMPLE.dependencies.rds } }),
    secrets: [{ key: 'API_KEY', value: 'the-api-key', is_sensitive: true }],
  });
  docker = { envId: a.envId, serviceId: web.service.id, token: a.token };
  await ok('POST', services, a, { ...VALID_SERVICE.github, installation_id: github });
  await ok('POST', services, a, { ...VALID_SERVICE.gitlab, installation_id: gitlab });
  await ok('POST', services, a, VALID_SERVICE.helm);
  await ok('POST', `/v1/environments/${b.envId}/services`, b, { ...VALID_SERVICE.docker, name: 'other' });
  const sources = ((await ok('GET', services, a)).services as { source: string }[]).map((s) => s.source);
  assert.deepEqual([...sources].sort(), [...SOURCES].sort(), 'a service of every source');
  const serviceUrl = `${services}/${web.service.id}`;
  for (let i = 0; i < 2; i++) {
    const deployed = await ok('POST', `${serviceUrl}/deploy`, a, {});
    await pollUntil('the deployment to succeed', async () => {
      const d = await ok('GET', `/v1/deployments/${deployed.deployment_id}`, a);
      assert.notEqual(d.deployment.state, 'failed');
      return d.deployment.state === 'success' ? true : undefined;
    });
  }
  await ok('POST', `${serviceUrl}/custom-domains`, a, { domain: 'app.example.com' });
  const dependencies = (await ok('GET', `${serviceUrl}/dependencies`, a)).dependencies as {
    id: string;
    kind: string;
  }[];
  const rds = dependencies.find((d) => d.kind === 'rds');
  assert.ok(rds, 'the service has an rds dependency');
  const dependencyBackups = `${serviceUrl}/dependencies/${rds.id}/backups`;
  await ok('POST', dependencyBackups, a, {});
  await pollUntil('the dependency backup to complete', async () => {
    const list = await ok('GET', dependencyBackups, a);
    return list.backups[0]?.state === 'completed' ? true : undefined;
  });
  await ok('POST', '/v1/webhooks', a, { url: 'http://127.0.0.1:9/hook', description: 'ci' });
  // Single sign-on settings, with their sealed client secret (one account's: the other's read is a 404).
  await ok('PUT', '/v1/sso', a, {
    issuer_url: 'https://idp.example.com',
    client_id: 'berth-console',
    client_secret: 'sso-client-secret',
    allowed_domains: ['example.com'],
    default_role: 'developer',
    enabled: true,
  });
  // Quiet from here: what the reads show is what is backed up.
  await worker.stop();
  before_ = await readEverything(h, tenants);

  const res = await h.app.inject({
    method: 'GET',
    url: '/admin/v1/backup',
    headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
  });
  assert.equal(res.statusCode, 200, res.body);
  assert.equal(res.headers['content-type'], 'application/gzip');
  assert.match(String(res.headers['content-disposition']), /filename="berth-backup-.*\.ndjson\.gz"/);
  fs.writeFileSync(file, res.rawPayload);
  closed = true;
  await h.close();

  restored = await createTestDatabase();
  cleanups.push(() => restored.drop());
  await restoreBackup(configOf(restored), file);
});

test('the manifest names the version, the migration level, the time and the master key; the trailer its checksum', async () => {
  const { manifest, trailer } = await readBackupFile(file);
  assert.equal(manifest.berth_version, '0.1.0');
  assert.equal(manifest.migration, manifest.migrations.berth?.at(-1));
  assert.ok(Date.now() - Date.parse(manifest.created_at) < 600_000);
  assert.equal(manifest.master_key_ids.length, 1);
  assert.match(trailer.sha256, /^[0-9a-f]{64}$/);
  assert.ok((trailer.tables.deployment_logs ?? 0) > 0, 'deployment logs are in it');
  assert.equal(trailer.tables.git_connections, 2);
});

test('restored into a fresh database, every read answers byte for byte the same, and a secret reaches the runtime', async () => {
  const h = await startHarness({ ...settings, databaseUrl: restored.databaseUrl, dataDir: restored.dataDir });
  try {
    await roundTrip(h);
  } finally {
    await h.close();
  }
});

async function roundTrip(h: Harness) {
  const after_ = await readEverything(h, tenants);
  assert.ok(before_.size > 40, `read ${before_.size} paths`);
  assert.deepEqual([...after_.keys()], [...before_.keys()]);
  for (const [url, body] of before_) assertSameRead(url, body, after_.get(url) as string);

  const variables = captureVariables(h);
  await h.startWorker();
  const serviceUrl = `/v1/environments/${docker.envId}/services/${docker.serviceId}`;
  const deployed = await h.request('POST', `${serviceUrl}/deploy`, { token: docker.token, body: {} });
  assert.equal(deployed.status, 200, deployed.raw);
  const id = deployed.body.data.deployment_id;
  const applied = await pollUntil('the runtime to get the variables', async () => variables.get(id));
  assert.equal(applied.API_KEY, 'the-api-key');
  assert.equal(applied.SHARED_TOKEN, 'shared-value');
}

/**
 * A read answers as before, byte for byte, but for a token's `last_used_at`: these reads use the token
 * too, and a use a minute or more after the last one recorded is written (on a loaded machine the
 * restore came that late). That one may only have moved forward.
 */
function assertSameRead(url: string, before: string, after: string) {
  const USED = /"last_used_at":"([^"]+)"/g;
  const usedBefore = [...before.matchAll(USED)].map((m) => m[1] as string);
  const usedAfter = [...after.matchAll(USED)].map((m) => m[1] as string);
  assert.equal(usedAfter.length, usedBefore.length, url);
  for (const [i, at] of usedAfter.entries()) {
    assert.ok(at >= (usedBefore[i] as string), `${url}: last_used_at went back`);
  }
  const unused = (body: string) => body.replace(USED, '"last_used_at":"(used)"');
  assert.equal(unused(after), unused(before), url);
}

/** The backup with its lines changed by `edit`; `reseal` computes the checksum again (a well-formed file). */
function rewritten(name: string, edit: (lines: string[]) => void, reseal: boolean): string {
  const lines = zlib.gunzipSync(fs.readFileSync(file)).toString('utf8').split('\n').slice(0, -1);
  const trailer = JSON.parse(lines.pop() as string);
  edit(lines);
  if (reseal) {
    trailer.sha256 = createHash('sha256')
      .update(lines.map((l) => `${l}\n`).join(''))
      .digest('hex');
  }
  const out = path.join(dir, name);
  fs.writeFileSync(out, zlib.gzipSync(`${[...lines, JSON.stringify(trailer)].join('\n')}\n`));
  return out;
}

async function assertNothingWritten(db: TestDatabase) {
  if (!db.databaseUrl) {
    assert.equal(fs.existsSync(path.join(db.dataDir, 'pgdata')), false, 'no database was created');
    return;
  }
  const store = await openStore({ databaseUrl: db.databaseUrl, dataDir: db.dataDir, migrate: false });
  try {
    assert.ok(await isEmptyDatabase(store.db));
  } finally {
    await store.close();
  }
}

test('a restore refuses a damaged file, a newer schema and the wrong master key, before writing anything', async () => {
  const target = await createTestDatabase();
  cleanups.push(() => target.drop());
  const damaged = rewritten(
    'damaged.ndjson.gz',
    (lines) => {
      const i = lines.findIndex((l) => l.includes('the-api-key') || l.includes('SHARED_TOKEN'));
      lines[i] = (lines[i] as string).replace('SHARED_TOKEN', 'SHARED_TOKEX');
    },
    false,
  );
  await assert.rejects(restoreBackup(configOf(target), damaged), /does not match its checksum/);
  await assertNothingWritten(target);

  const newer = rewritten(
    'newer.ndjson.gz',
    (lines) => {
      const manifest = JSON.parse(lines[0] as string);
      manifest.migrations.berth.push('9999-from-the-future');
      manifest.migration = '9999-from-the-future';
      lines[0] = JSON.stringify(manifest);
    },
    true,
  );
  await assert.rejects(
    restoreBackup(configOf(target), newer),
    /comes from a newer Berth .*migration 9999-from-the-future, which this Berth \(0\.1\.0\) does not know/,
  );
  await assertNothingWritten(target);

  const other = randomBytes(32).toString('hex');
  await assert.rejects(
    restoreBackup(configOf(target, other), file),
    /wrong master key: .* sealed with the master key [0-9a-f]{12}, and BERTH_MASTER_KEY holds .*Set BERTH_MASTER_KEY/,
  );
  await assertNothingWritten(target);

  const cut = path.join(dir, 'cut.ndjson.gz');
  const whole = fs.readFileSync(file);
  fs.writeFileSync(cut, whole.subarray(0, Math.floor(whole.length / 2)));
  await assert.rejects(
    restoreBackup(configOf(target), cut),
    /not a Berth backup|not a complete Berth backup/,
  );
  await assertNothingWritten(target);

  // A mistyped name or a directory: one line naming it (once an unhandled stream error that crashed).
  const absent = path.join(dir, 'absent.ndjson.gz');
  await assert.rejects(restoreBackup(configOf(target), absent), { message: `${absent}: no such file` });
  await assert.rejects(restoreBackup(configOf(target), dir), {
    message: `${dir} is a directory: name a backup file in it`,
  });
  await assertNothingWritten(target);
});

test('a restore refuses a database that is not empty', async () => {
  await assert.rejects(
    restoreBackup(configOf(restored), file),
    /is not empty: restore onto a new, empty one/,
  );
});

test('one process takes each scheduled tick; retention keeps the newest; a failed backup removes none', async () => {
  const store = await openStore({ databaseUrl: restored.databaseUrl, dataDir: restored.dataDir });
  try {
    const tick = new Date('2031-01-01T03:00:00Z');
    assert.equal(await claimScheduledBackup(store, tick), true);
    assert.equal(await claimScheduledBackup(store, tick), false, 'a second process finds the tick taken');
    assert.equal(await claimScheduledBackup(store, new Date('2031-01-02T03:00:00Z')), true);

    const backups = path.join(dir, 'scheduled');
    for (let day = 1; day <= 4; day++) {
      await scheduledBackup(store, backups, 3, new Date(`2031-01-0${day}T03:00:00Z`));
    }
    const kept = fs.readdirSync(backups).sort();
    assert.deepEqual(kept, [
      'berth-backup-2031-01-02T03-00-00-000Z.ndjson.gz',
      'berth-backup-2031-01-03T03-00-00-000Z.ndjson.gz',
      'berth-backup-2031-01-04T03-00-00-000Z.ndjson.gz',
    ]);
    for (const name of kept) await readBackupFile(path.join(backups, name));

    // A target that cannot be written: the reason, and every earlier backup still there.
    const blocked = path.join(dir, 'not-a-directory');
    fs.writeFileSync(blocked, '');
    await assert.rejects(scheduledBackup(store, path.join(blocked, 'backups'), 1), /is not a directory/);
    // A backup that fails halfway (its database gone): nothing removed, no partial file left.
    await store.close();
    await assert.rejects(scheduledBackup(store, backups, 1, new Date('2031-01-05T03:00:00Z')));
    assert.deepEqual(fs.readdirSync(backups).sort(), kept, 'no backup removed, no partial file left');
  } finally {
    await store.close().catch(() => {});
  }
});

test("a backup an older Berth took restores: its schema first, its rows, then this Berth's newer migrations", async () => {
  // An installation stopped at migration 0005 (older than the embedded snapshot: the restore makes its
  // database with initdb): the first tables, one account, its sealing key recorded.
  const old = await createTestDatabase();
  cleanups.push(() => old.drop());
  const level = KNOWN_MIGRATIONS.slice(0, 5);
  const store = await openStore({
    databaseUrl: old.databaseUrl,
    dataDir: old.dataDir,
    migrate: false,
    initdb: true,
  });
  const olderFile = path.join(dir, 'older.ndjson.gz');
  const box = new SecretBox([Buffer.from(KEY, 'hex')]);
  try {
    await migrateToLatest(store.db, level);
    await sql`INSERT INTO accounts (id, name, plan) VALUES ('7d1c8a52-4c4b-4a43-9d7e-2f3c1f2a9c10', 'old', 'pro')`.execute(
      store.db,
    );
    await sql`INSERT INTO settings (key, value) VALUES ('master_key_ids', ${box.currentId})`.execute(
      store.db,
    );
    await takeBackup(store, olderFile);
  } finally {
    await store.close();
  }
  const { manifest } = await readBackupFile(olderFile);
  assert.equal(manifest.migration, level.at(-1));

  const target = await createTestDatabase();
  cleanups.push(() => target.drop());
  await restoreBackup(configOf(target), olderFile);
  const restoredStore = await openStore({
    databaseUrl: target.databaseUrl,
    dataDir: target.dataDir,
    migrate: false,
  });
  try {
    assert.deepEqual(
      await appliedMigrations(restoredStore.db).then((m) => [...m].sort()),
      [...KNOWN_MIGRATIONS].sort(),
    );
    const { rows } = await sql<{ name: string; plan: string }>`SELECT name, plan FROM accounts`.execute(
      restoredStore.db,
    );
    assert.deepEqual(rows, [{ name: 'old', plan: 'pro' }]);
  } finally {
    await restoredStore.close();
  }
});

test('backup settings: a bad schedule or bucket URL stops the start, naming the setting', () => {
  const config = loadConfig({
    BERTH_DATA_DIR: '/srv/berth',
    BERTH_BACKUP_SCHEDULE: '0 3 * * *',
    BERTH_BACKUP_S3_URL: 's3://acme-backups/berth/nightly/',
    BERTH_BACKUP_S3_ENDPOINT: 'https://minio.internal:9000',
  });
  assert.equal(config.backupSchedule, '0 3 * * *');
  assert.equal(config.backupDir, '/srv/berth/backups');
  assert.equal(config.backupKeep, 7);
  assert.deepEqual(config.backupS3, {
    bucket: 'acme-backups',
    prefix: 'berth/nightly/',
    endpoint: 'https://minio.internal:9000',
    region: 'us-east-1',
  });
  assert.equal(loadConfig({ BERTH_BACKUP_S3_URL: 's3://acme-backups' }).backupS3?.prefix, '');
  assert.throws(
    () => loadConfig({ BERTH_BACKUP_SCHEDULE: 'every night' }),
    /BERTH_BACKUP_SCHEDULE must be a cron expression/,
  );
  assert.throws(
    () => loadConfig({ BERTH_BACKUP_S3_URL: 'https://acme/x' }),
    /BERTH_BACKUP_S3_URL must be s3:\/\/bucket/,
  );
  assert.throws(() => loadConfig({ BERTH_BACKUP_S3_ENDPOINT: 'http://x' }), /without BERTH_BACKUP_S3_URL/);
  assert.throws(() => loadConfig({ BERTH_BACKUP_KEEP: '0' }), /BERTH_BACKUP_KEEP must be a whole number/);
});

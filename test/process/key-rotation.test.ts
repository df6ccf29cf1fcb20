import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { isDeepStrictEqual } from 'node:util';
import { sql } from 'kysely';
import { openStore } from '../../src/store/database.ts';
import { SecretBox } from '../../src/store/secret-box.ts';
import { HOSTED_EXAMPLE } from '../helpers/ops-json-examples.ts';
import { pollUntil } from '../helpers/poll.ts';
import { api, deploymentEnd, firstStartOf, runBerth } from '../helpers/process.ts';
import { type Servers, serverFixture } from '../helpers/server.ts';

/**
 * `berth admin rotate-master-key` (docs/operations.md): every sealed value is re-sealed under the new
 * key while the server serves; afterwards the server starts with only the new key; a rotation killed
 * halfway resumes when run again.
 */
const ADMIN_TOKEN = 'a6f1c0de-8a43-4b5e-9d7e-2f3c1f2a9c10';
// Each test has a database of its own (servers.another()).
const servers = serverFixture('sim', {
  BERTH_ADMIN_TOKEN: ADMIN_TOKEN,
  BERTH_RATE_LIMIT_PER_MIN: '1000000',
  BERTH_WEBHOOK_ALLOW_PRIVATE: '1',
});

const newKey = () => randomBytes(32).toString('hex');
const idOf = (hex: string) => createHash('sha256').update(Buffer.from(hex, 'hex')).digest('hex').slice(0, 12);

type Values = Record<string, string>;
interface Installation {
  token: string;
  /** Paths under a server's URL (each start listens on another port). */
  envPath: string;
  servicePath: string;
  serviceId: string;
  serviceSecrets: Values;
  envSecrets: Values;
  passwordArn: string;
  password: string;
}

const entries = (values: Values) => Object.entries(values).map(([key, value]) => ({ key, value }));
const valuesOf = (body: { data: { secrets: { key: string; value: string }[] } }) =>
  Object.fromEntries(body.data.secrets.map((s) => [s.key, s.value]));

/**
 * A value in every sealed column: secrets of both scopes, a deployment's variables, a dependency's
 * password, a webhook's and a git connection's secrets, single sign-on's client secret.
 */
async function populate(url: string, token: string, envPath: string): Promise<Installation> {
  const envUrl = url + envPath;
  const serviceSecrets = Object.fromEntries(
    Array.from({ length: 24 }, (_, i) => [`SERVICE_${i}`, `service-value-${i}`]),
  );
  const envSecrets = Object.fromEntries(
    Array.from({ length: 8 }, (_, i) => [`SHARED_${i}`, `shared-value-${i}`]),
  );
  const ok = (res: { status: number; body: unknown }) => {
    assert.equal(res.status, 200, JSON.stringify(res.body));
    // biome-ignore lint/suspicious/noExplicitAny: JSON bodies
    return res.body as any;
  };
  ok(await api(`${envUrl}/secrets`, token, 'PUT', { secrets: entries(envSecrets) }));
  const created = ok(
    await api(`${envUrl}/services`, token, 'POST', {
      name: 'keeper',
      source: 'docker_image',
      type: 'worker',
      replica_count: 1,
      cpu_count_min: 0.5,
      memory_mb_min: 128,
      docker_image: 'acme/keeper',
      ops_json: JSON.stringify({ dependencies: { rds: HOSTED_EXAMPLE.dependencies.rds } }),
      secrets: entries(serviceSecrets),
    }),
  );
  const serviceId = created.data.service.id as string;
  const servicePath = `${envPath}/services/${serviceId}`;
  const serviceUrl = url + servicePath;
  const deployed = ok(await api(`${serviceUrl}/deploy`, token, 'POST', {}));
  assert.equal((await deploymentEnd(url, token, deployed.data.deployment_id)).state, 'success');
  // With an Idempotency-Key: its stored answer (it carries the signing secret) is sealed too.
  const webhook = await fetch(`${url}/v1/webhooks`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${token}`,
      'content-type': 'application/json',
      'idempotency-key': 'hook-1',
    },
    body: JSON.stringify({ url: 'http://127.0.0.1:9/hook' }),
  });
  assert.equal(webhook.status, 200, await webhook.text());
  const account = ok(await api(`${url}/admin/v1/accounts`, ADMIN_TOKEN)).data.accounts[0].id;
  ok(
    await api(`${url}/admin/v1/accounts/${account}/git-connections`, ADMIN_TOKEN, 'POST', {
      kind: 'github',
      name: 'acme',
      token: 'ghp_rotation0000000000000000000000000000',
      webhook_secret: 'hook-secret-of-the-connection',
    }),
  );
  // Single sign-on's client secret (docs/sso.md): no provider is asked until someone signs in.
  ok(
    await api(`${url}/v1/sso`, token, 'PUT', {
      issuer_url: 'https://login.example.com',
      client_id: 'berth',
      client_secret: 'client-secret-of-the-provider',
      allowed_domains: ['example.com'],
      default_role: 'viewer',
      enabled: true,
    }),
  );
  const dependencies = ok(await api(`${serviceUrl}/dependencies`, token)).data.dependencies;
  const passwordArn = dependencies.find((d: { kind: string }) => d.kind === 'rds').attributes.passwordArn;
  const password = await dependencyPassword(url, passwordArn);
  return { token, envPath, servicePath, serviceId, serviceSecrets, envSecrets, passwordArn, password };
}

async function dependencyPassword(url: string, arn: string): Promise<string> {
  const res = await api(`${url}/admin/v1/dependency-passwords?arn=${encodeURIComponent(arn)}`, ADMIN_TOKEN);
  assert.equal(res.status, 200, JSON.stringify(res.body));
  return res.body.data.password;
}

/** Every value is still what was written, read through a server holding only `key`. */
async function assertEverythingOpens(db: Servers, key: string, it: Installation) {
  const server = await db.serve({ BERTH_MASTER_KEY: key });
  try {
    assert.deepEqual(
      valuesOf((await api(`${server.url}${it.servicePath}/secrets`, it.token)).body),
      it.serviceSecrets,
    );
    assert.deepEqual(
      valuesOf((await api(`${server.url}${it.envPath}/secrets`, it.token)).body),
      it.envSecrets,
    );
    assert.equal(await dependencyPassword(server.url, it.passwordArn), it.password);
    // A new deployment opens the secrets and the dependency's password, and seals its variables.
    const deployed = await api(`${server.url}${it.servicePath}/deploy`, it.token, 'POST', {});
    assert.equal(deployed.status, 200, JSON.stringify(deployed.body));
    assert.equal(
      (await deploymentEnd(server.url, it.token, deployed.body.data.deployment_id)).state,
      'success',
    );
    // With one key, already sealing everything, there is nothing to rotate to: the command says what to set.
    const idle = rotateWithCli(server.url);
    assert.equal(await idle.exited, 6, idle.stderr());
    assert.match(
      idle.stderr(),
      /conflict: every value is sealed with the only key in BERTH_MASTER_KEY .*to rotate, set BERTH_MASTER_KEY to the new key/,
    );
  } finally {
    assert.equal(await server.kill('SIGTERM'), 0);
  }
  // What the runtime was handed: the variables the new deployment recorded, opened with only the new key.
  const store = await openStore({ databaseUrl: db.database.databaseUrl, dataDir: db.database.dataDir });
  try {
    const deployment = await store.db
      .selectFrom('deployments')
      .selectAll()
      .where('service_id', '=', it.serviceId)
      .orderBy('created_at', 'desc')
      .executeTakeFirstOrThrow();
    assert.ok(deployment.variables_sealed, 'the deployment recorded its variables');
    const variables = JSON.parse(new SecretBox([Buffer.from(key, 'hex')]).open(deployment.variables_sealed));
    for (const [k, v] of Object.entries({ ...it.envSecrets, ...it.serviceSecrets })) {
      assert.equal(variables[k], v, `the runtime gets ${k}`);
    }
  } finally {
    await store.close();
  }
}

/** How many values each key id seals, over every text in every table. */
async function sealedByKey(db: Servers, ids: string[]): Promise<Record<string, number>> {
  const store = await openStore({ databaseUrl: db.database.databaseUrl, dataDir: db.database.dataDir });
  try {
    const tables = await sql<{
      tablename: string;
    }>`SELECT tablename FROM pg_tables WHERE schemaname = 'public'`.execute(store.db);
    const counts = Object.fromEntries(ids.map((id) => [id, 0]));
    for (const { tablename } of tables.rows) {
      const dump = await sql<{
        row: unknown;
      }>`SELECT to_jsonb(t) AS row FROM ${sql.table(tablename)} t`.execute(store.db);
      const text = JSON.stringify(dump.rows);
      for (const id of ids) counts[id] = (counts[id] ?? 0) + text.split(`"v1:${id}:`).length - 1;
    }
    return counts;
  } finally {
    await store.close();
  }
}

async function install(db: Servers, key: string | undefined): Promise<Installation> {
  const server = await db.serve(key ? { BERTH_MASTER_KEY: key } : {});
  try {
    const { token, envUrl } = await firstStartOf(server);
    return await populate(server.url, token, envUrl.slice(server.url.length));
  } finally {
    assert.equal(await server.kill('SIGTERM'), 0);
  }
}

function rotateWithCli(url: string) {
  return runBerth(['admin', '-o', 'json', 'rotate-master-key'], {
    BERTH_URL: url,
    BERTH_ADMIN_TOKEN: ADMIN_TOKEN,
  });
}

test('rotation under load: no request fails; then the server starts with only the new key and every value opens', async () => {
  const db = await servers.another();
  const [oldKey, key] = [newKey(), newKey()];
  const it = await install(db, oldKey);
  const before = await sealedByKey(db, [idOf(oldKey)]);
  assert.ok((before[idOf(oldKey)] ?? 0) >= 37, JSON.stringify(before));

  const server = await db.serve({
    BERTH_MASTER_KEY: `${key},${oldKey}`,
    BERTH_KEY_ROTATION_BATCH: '2',
    BERTH_KEY_ROTATION_PAUSE_MS: '20',
  });
  const failures: string[] = [];
  let requests = 0;
  let rotating = true;
  let written = it.envSecrets;
  // Reads check every value; writes replace the environment's secrets with new values, while values move.
  const round = async (n: number) => {
    const shared = { ...it.envSecrets, LOAD: `load-${n}` };
    const put = await api(`${server.url}${it.envPath}/secrets`, it.token, 'PUT', {
      secrets: entries(shared),
    });
    const own = await api(`${server.url}${it.servicePath}/secrets`, it.token);
    const env = await api(`${server.url}${it.envPath}/secrets`, it.token);
    requests += 3;
    written = shared;
    if (put.status !== 200) failures.push(`PUT ${put.status} ${JSON.stringify(put.body)}`);
    if (own.status !== 200 || !isDeepStrictEqual(valuesOf(own.body), it.serviceSecrets))
      failures.push(`GET service secrets ${own.status} ${JSON.stringify(own.body).slice(0, 300)}`);
    if (env.status !== 200 || !isDeepStrictEqual(valuesOf(env.body), shared))
      failures.push(`GET environment secrets ${env.status} ${JSON.stringify(env.body).slice(0, 300)}`);
  };
  const load = (async () => {
    for (let n = 0; rotating; n++) await round(n).catch((error) => failures.push(String(error)));
  })();
  try {
    await pollUntil('some load before the rotation', async () => (requests >= 9 ? true : undefined));
    const started = requests;
    const cli = rotateWithCli(server.url);
    assert.equal(await cli.exited, 0, cli.stderr());
    const during = requests;
    assert.ok(during - started >= 3, 'requests ran while the key rotated');
    const { rotation } = JSON.parse(cli.stdout());
    assert.equal(rotation.key_id, idOf(key));
    assert.deepEqual(rotation.retired_key_ids, [idOf(oldKey)]);
    assert.ok(rotation.resealed >= 37, JSON.stringify(rotation));
    await pollUntil('more load after the rotation', async () => (requests >= during + 9 ? true : undefined));
  } finally {
    rotating = false;
    await load;
    assert.equal(await server.kill('SIGTERM'), 0);
  }
  assert.deepEqual(failures, []);
  it.envSecrets = written;

  const after = await sealedByKey(db, [idOf(oldKey), idOf(key)]);
  assert.equal(after[idOf(oldKey)], 0, 'no value is left under the old key');
  assert.ok((after[idOf(key)] ?? 0) >= 37);

  // The old key alone no longer opens anything: refused at start, naming the setting.
  const stale = db.run(['serve'], { BERTH_MASTER_KEY: oldKey, BERTH_PORT: '0' });
  assert.equal(await stale.exited, 2);
  assert.match(
    stale.stderr(),
    new RegExp(`sealed with the master key ${idOf(key)}, which this process does not have`),
  );
  assert.match(stale.stderr(), /BERTH_MASTER_KEY/);

  await assertEverythingOpens(db, key, it);
});

test('SIGKILL halfway through rotating the generated key: a start with only the new key refuses, the rotation run again resumes, no value is lost', async () => {
  const db = await servers.another();
  const keyFile = path.join(db.database.dataDir, 'master.key');
  const it = await install(db, undefined);
  const oldKey = fs.readFileSync(keyFile, 'utf8').trim();
  const eventsBefore = await secretEvents(db);

  // One value a batch, and a pause after each: the kill lands between batches.
  const slow = { BERTH_KEY_ROTATION_BATCH: '1', BERTH_KEY_ROTATION_PAUSE_MS: '50', BERTH_LOG_LEVEL: 'info' };
  const server = await db.serve(slow);
  const killed = fetch(`${server.url}/admin/v1/master-key/rotate`, {
    method: 'POST',
    headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
    body: '{}',
  }).catch(() => 'cut off');
  try {
    await server.waitForOutput(/(?:master key rotation batch[\s\S]*?){10}/);
  } finally {
    assert.equal(await server.kill('SIGKILL'), 'SIGKILL');
  }
  assert.equal(await killed, 'cut off');

  // The new key was on disk before anything was sealed with it; both are there until the rotation ends.
  const keys = fs.readFileSync(keyFile, 'utf8').trim().split('\n');
  assert.equal(keys.length, 2);
  assert.equal(keys[1], oldKey);
  const key = keys[0] as string;
  const halfway = await sealedByKey(db, [idOf(oldKey), idOf(key)]);
  assert.ok((halfway[idOf(oldKey)] ?? 0) > 0 && (halfway[idOf(key)] ?? 0) > 0, JSON.stringify(halfway));

  const early = db.run(['serve'], { BERTH_MASTER_KEY: key, BERTH_PORT: '0' });
  assert.equal(await early.exited, 2);
  assert.match(
    early.stderr(),
    new RegExp(`sealed with the master key ${idOf(oldKey)}, which this process does not have`),
  );
  assert.match(early.stderr(), /BERTH_MASTER_KEY/);

  const resumed = await db.serve();
  try {
    const cli = rotateWithCli(resumed.url);
    assert.equal(await cli.exited, 0, cli.stderr());
    const { rotation } = JSON.parse(cli.stdout());
    assert.equal(rotation.key_id, idOf(key), 'the rotation resumed to the same key');
    assert.deepEqual(rotation.retired_key_ids, [idOf(oldKey)]);
    assert.equal(rotation.resealed, halfway[idOf(oldKey)]);
  } finally {
    assert.equal(await resumed.kill('SIGTERM'), 0);
  }
  assert.equal(fs.readFileSync(keyFile, 'utf8').trim(), key, 'the key file keeps only the new key');
  assert.equal(fs.readFileSync(`${keyFile}.retired`, 'utf8').trim(), oldKey, 'the old key is kept apart');
  const done = await sealedByKey(db, [idOf(oldKey), idOf(key)]);
  assert.equal(done[idOf(oldKey)], 0);
  // No value lost; one more: the command's own answer, stored sealed with its Idempotency-Key.
  assert.equal(done[idOf(key)], (halfway[idOf(oldKey)] ?? 0) + (halfway[idOf(key)] ?? 0) + 1);
  assert.equal(await secretEvents(db), eventsBefore, 're-sealing a secret is no event');

  await assertEverythingOpens(db, key, it);
});

/** Secret events recorded so far. */
async function secretEvents(db: Servers): Promise<number> {
  const store = await openStore({ databaseUrl: db.database.databaseUrl, dataDir: db.database.dataDir });
  try {
    const { rows } = await sql<{ n: string | number }>`
      SELECT count(*) AS n FROM events WHERE type LIKE 'secret.%'`.execute(store.db);
    return Number(rows[0]?.n);
  } finally {
    await store.close();
  }
}

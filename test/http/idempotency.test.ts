import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { sql } from 'kysely';
import { ConflictError } from '../../src/domain/errors.ts';
import { createEnvironment } from '../../src/domain/usecases/environments.ts';
import { claimKey } from '../../src/store/repositories/idempotency-keys.ts';
import { ADMIN_TOKEN, type Reply, startHarness, VALID_SERVICE } from '../helpers/harness.ts';

/** Issue 17 item 6: Idempotency-Key on every POST, as Stripe does it. */
const h = await startHarness({ rateLimitPerMin: 1_000_000 });
after(() => h.close());
const t = await h.tenant();
const env = `/v1/environments/${t.envId}`;

const post = (url: string, body: unknown, key: string, token = t.token) =>
  h.request('POST', url, { token, body, headers: { 'idempotency-key': key } });
const servicesNamed = async (name: string, token = t.token, envId = t.envId) =>
  (
    await h.request('GET', `/v1/environments/${envId}/services?limit=100`, { token })
  ).body.data.services.filter((s: { name: string }) => s.name === name);
const sameAnswer = (first: Reply, again: Reply) => {
  assert.equal(again.status, first.status);
  assert.equal(again.raw, first.raw);
  assert.equal(again.headers['idempotent-replayed'], 'true');
  assert.equal(first.headers['idempotent-replayed'], undefined);
};

test('a create and a deploy retried with their key are done once and answered the same', async () => {
  const body = { ...VALID_SERVICE.docker, name: 'Once Only' };
  const first = await post(`${env}/services`, body, 'create-1');
  assert.equal(first.status, 200, first.raw);
  sameAnswer(first, await post(`${env}/services`, body, 'create-1'));
  assert.equal((await servicesNamed('Once Only')).length, 1);

  const deployUrl = `${env}/services/${first.body.data.service.id}/deploy`;
  const deployed = await post(deployUrl, { note: 'retry me' }, 'deploy-1');
  assert.equal(deployed.status, 200, deployed.raw);
  sameAnswer(deployed, await post(deployUrl, { note: 'retry me' }, 'deploy-1'));
  const list = await h.request('GET', `${env}/services/${first.body.data.service.id}/deployments`, {
    token: t.token,
  });
  assert.deepEqual(
    list.body.data.deployments.map((d: { id: string }) => d.id),
    [deployed.body.data.deployment_id],
  );
});

test("a create whose deploy_now failed is replayed with the service's id header, so a retry can find it", async () => {
  // The sim provider refuses an image named refuse*: the service is kept, the answer is the spec's 500.
  const body = { ...VALID_SERVICE.docker, name: 'Refused Once', docker_image: 'refuse', deploy_now: true };
  const first = await post(`${env}/services`, body, 'refused-1');
  assert.equal(first.status, 500, first.raw);
  const id = first.headers['x-berth-service-id'];
  assert.ok(id, 'the first answer names the service');
  const again = await post(`${env}/services`, body, 'refused-1');
  sameAnswer(first, again);
  assert.equal(again.headers['x-berth-service-id'], id);
  assert.equal((await servicesNamed('Refused Once')).length, 1);
});

test('a refused request (4xx, nothing done) is not remembered: a retry runs again, unmarked, and may then succeed', async () => {
  const bad = { ...VALID_SERVICE.docker, name: 'Refused Then Fixed', replica_count: -1 };
  for (let i = 0; i < 2; i++) {
    const res = await post(`${env}/services`, bad, 'refused-4xx');
    assert.equal(res.status, 422, res.raw);
    assert.equal(
      res.headers['idempotent-replayed'],
      undefined,
      'answered by the request itself, not replayed',
    );
  }
  const conflicting = {
    ...VALID_SERVICE.docker,
    name: 'Refused Then Fixed',
    cpu_count_min: 2,
    cpu_count_max: 1,
  };
  assert.equal((await post(`${env}/services`, conflicting, 'refused-4xx')).status, 422);
  const fixed = { ...VALID_SERVICE.docker, name: 'Refused Then Fixed' };
  const done = await post(`${env}/services`, fixed, 'refused-4xx');
  assert.equal(done.status, 200, done.raw);
  sameAnswer(done, await post(`${env}/services`, fixed, 'refused-4xx'));
  assert.equal((await servicesNamed('Refused Then Fixed')).length, 1);
});

test('the same key with a different request is refused, and changes nothing', async () => {
  const body = { ...VALID_SERVICE.docker, name: 'Keyed Once' };
  assert.equal((await post(`${env}/services`, body, 'reused')).status, 200);
  for (const [url, other] of [
    [`${env}/services`, { ...body, replica_count: 3 }],
    [`${env}/services?x=1`, body],
    [`/v1/environments/${t.envId}/secrets`, { secrets: [] }],
  ] as const) {
    const res = await h.request(url.endsWith('secrets') ? 'PUT' : 'POST', url, {
      token: t.token,
      body: other,
      headers: { 'idempotency-key': 'reused' },
    });
    if (url.endsWith('secrets')) {
      // Only POSTs take keys: a PUT is idempotent by itself and ignores one.
      assert.equal(res.status, 200, res.raw);
      continue;
    }
    assert.equal(res.status, 422, res.raw);
    assert.deepEqual(res.body, {
      error_code: 'validation',
      message: 'Invalid data',
      errors: [
        {
          field: 'Idempotency-Key',
          error: 'Idempotency-Key was already used for a different request; use a new key',
        },
      ],
    });
  }
  const [service] = await servicesNamed('Keyed Once');
  assert.equal(service.replica_count, 2);
  const bad = await post(`${env}/services`, body, 'a key with spaces');
  assert.equal(bad.status, 422);
  assert.equal(bad.body.errors[0].field, 'Idempotency-Key');
});

test('keys are per account: another account using the same key gets its own resource', async () => {
  const other = await h.tenant();
  const body = { ...VALID_SERVICE.docker, name: 'Shared Key' };
  const mine = await post(`${env}/services`, body, 'shared');
  const theirs = await post(`/v1/environments/${other.envId}/services`, body, 'shared', other.token);
  assert.equal(theirs.status, 200, theirs.raw);
  assert.notEqual(theirs.body.data.service.id, mine.body.data.service.id);
  assert.equal(theirs.headers['idempotent-replayed'], undefined);
  assert.equal((await servicesNamed('Shared Key', other.token, other.envId)).length, 1);
});

test('concurrent requests with one key do the work once and all get its answer', async () => {
  for (let round = 0; round < 5; round++) {
    const name = `Raced Key ${'abcde'[round]}`;
    const body = { ...VALID_SERVICE.docker, name };
    const answers = await Promise.all(
      Array.from({ length: 8 }, () => post(`${env}/services`, body, `race-${round}`)),
    );
    for (const res of answers) {
      assert.equal(res.status, 200, res.raw);
      assert.equal(res.raw, answers[0]?.raw);
    }
    assert.equal(answers.filter((r) => r.headers['idempotent-replayed'] === undefined).length, 1);
    assert.equal((await servicesNamed(name)).length, 1);
  }
});

test('admin POSTs take keys too', async () => {
  const first = await h.request('POST', '/admin/v1/accounts', {
    token: null,
    body: { name: 'keyed' },
    headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'idempotency-key': 'acct' },
  });
  const again = await h.request('POST', '/admin/v1/accounts', {
    body: { name: 'keyed' },
    headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'idempotency-key': 'acct' },
  });
  assert.equal(first.status, 200, first.raw);
  sameAnswer(first, again);
});

/** Moves a key's claim back past the 10 minutes after which a key whose request never finished is taken over. */
const age = (key: string) =>
  sql`UPDATE idempotency_keys SET created_at = now() - interval '11 minutes' WHERE key = ${key}`.execute(
    h.deps.store.db,
  );

test('a key whose work committed is never run again, even when its answer was never stored', async () => {
  // The process "dies" between the work's commit and the answer's write: here the write fails instead.
  const db = h.deps.store.db;
  await sql`CREATE FUNCTION lose_answer() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN RAISE EXCEPTION 'answer lost'; END $$`.execute(db);
  await sql`CREATE TRIGGER lose_answer BEFORE UPDATE ON idempotency_keys FOR EACH ROW
    WHEN (NEW.status IS NOT NULL) EXECUTE FUNCTION lose_answer()`.execute(db);
  const body = { ...VALID_SERVICE.docker, name: 'Answer Lost' };
  try {
    await post(`${env}/services`, body, 'lost-answer');
  } finally {
    await sql`DROP TRIGGER lose_answer ON idempotency_keys`.execute(db);
    await sql`DROP FUNCTION lose_answer()`.execute(db);
  }
  assert.equal((await servicesNamed('Answer Lost')).length, 1);
  // Long after, when a key whose request never finished would be free again, a retry still does nothing.
  await age('lost-answer');
  const retry = await post(`${env}/services`, body, 'lost-answer');
  assert.equal(retry.status, 409, retry.raw);
  assert.match(retry.body.message, /was done, but its server stopped before answering/);
  assert.equal((await servicesNamed('Answer Lost')).length, 1);
});

test('a request whose abandoned key was taken over cannot commit its work', async () => {
  const db = h.deps.store.db;
  const stale = await claimKey(db, t.accountId, 'taken-over', 'same request');
  assert.ok(stale);
  await age('taken-over');
  const fresh = await claimKey(db, t.accountId, 'taken-over', 'same request');
  assert.ok(fresh);
  const actor = (claim: typeof stale) => ({
    accountId: t.accountId,
    tokenId: null,
    requestId: 'taken-over',
    idempotency: claim,
  });
  await assert.rejects(createEnvironment(h.deps, actor(stale), { name: 'Taken Over' }), ConflictError);
  await createEnvironment(h.deps, actor(fresh), { name: 'Taken Over' });
  const named = await db
    .selectFrom('environments')
    .select('id')
    .where('account_id', '=', t.accountId)
    .where('name', '=', 'Taken Over')
    .execute();
  assert.equal(named.length, 1);
});

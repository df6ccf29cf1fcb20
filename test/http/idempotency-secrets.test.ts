import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { after, test } from 'node:test';
import { sql } from 'kysely';
import { TEST_DATABASE } from '../helpers/database.ts';
import { ADMIN_TOKEN, type Reply, startHarness } from '../helpers/harness.ts';

/**
 * Issue 24 item 3: an answer stored for an Idempotency-Key is sealed, so a one-time secret it carries
 * (an issued API token, a webhook's signing secret) is never in the database in the clear: not in the
 * embedded database's files, not in a pg_dump. A replay still answers the same bytes.
 */
const h = await startHarness({ webhookAllowPrivate: true });
const t = await h.tenant();
let closed = false;
after(() => (closed ? undefined : h.close()));

const post = (url: string, key: string, body: unknown, admin = false): Promise<Reply> =>
  admin
    ? h.request('POST', `/admin/v1${url}`, {
        token: ADMIN_TOKEN,
        body,
        headers: { 'idempotency-key': key },
      })
    : h.request('POST', url, { token: t.token, body, headers: { 'idempotency-key': key } });

/** Every file under `dir` whose bytes hold `needle`. */
function filesHolding(dir: string, needle: string): string[] {
  const bytes = Buffer.from(needle);
  return fs
    .readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => path.join(e.parentPath, e.name))
    .filter((file) => fs.readFileSync(file).includes(bytes));
}

test('issued tokens and webhook secrets are stored sealed with their key, and replayed the same', async () => {
  const secrets: string[] = [];
  for (const [url, body, admin, pick] of [
    [`/accounts/${t.accountId}/api-tokens`, undefined, true, (r: Reply) => r.body.data.api_token],
    ['/v1/webhooks', { url: 'http://127.0.0.1:9/in' }, false, (r: Reply) => r.body.data.webhook.secret],
  ] as const) {
    const first = await post(url, `key-${url}`, body, admin);
    assert.equal(first.status, 200, first.raw);
    const secret = pick(first) as string;
    assert.ok(secret.length >= 32, secret);
    secrets.push(secret, secret.replace(/^whsec_/, ''));
    const again = await post(url, `key-${url}`, body, admin);
    assert.equal(again.headers['idempotent-replayed'], 'true');
    assert.equal(again.raw, first.raw);
  }
  if (TEST_DATABASE === 'postgres') {
    const dump = execFileSync('pg_dump', ['--data-only', h.deps.config.databaseUrl as string], {
      maxBuffer: 256 * 1024 * 1024,
    }).toString('utf8');
    assert.ok(dump.includes('idempotency_keys'), 'the dump holds the table');
    for (const s of secrets) assert.equal(dump.includes(s), false, 'a secret in the pg_dump');
  } else {
    await sql`CHECKPOINT`.execute(h.deps.store.db);
  }
  const dataDir = h.deps.config.dataDir;
  closed = true;
  await h.close(async () => {
    if (TEST_DATABASE !== 'embedded') return;
    assert.ok(fs.readdirSync(dataDir).length > 0, 'the embedded database has files');
    for (const s of secrets) assert.deepEqual(filesHolding(dataDir, s), [], 'a secret in a database file');
  });
});

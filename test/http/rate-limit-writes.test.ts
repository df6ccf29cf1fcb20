/**
 * On Postgres the per-token window lives in the database: concurrent requests of one token share its
 * writes, and each still gets its own place in the window (the count stays exact).
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { TEST_DATABASE } from '../helpers/database.ts';
import { type Harness, startHarness, type Tenant } from '../helpers/harness.ts';

const LIMIT = 1000;
let h: Harness;
let t: Tenant;
before(async () => {
  h = await startHarness({ rateLimitPerMin: LIMIT });
  t = await h.tenant();
});
after(() => h.close());

test('concurrent requests of one token are counted together, each in its own place of the window', {
  skip: TEST_DATABASE !== 'postgres' && 'the embedded database counts in memory',
}, async () => {
  await h.request('GET', '/v1/environments', { token: t.token });
  h.queries.length = 0;
  const COUNT = 50;
  const answers = await Promise.all(
    Array.from({ length: COUNT }, () => h.request('GET', '/v1/environments', { token: t.token })),
  );
  const writes = h.queries.filter((q) => q.includes('rate_limit_windows'));
  assert.ok(writes.length < COUNT, `${writes.length} writes for ${COUNT} requests`);
  const remaining = answers.map((a) => Number(a.headers['ratelimit-remaining'])).sort((a, b) => a - b);
  // The first request took place 1: these are 2..51, each once.
  assert.deepEqual(
    remaining,
    Array.from({ length: COUNT }, (_, i) => LIMIT - COUNT - 1 + i),
  );
});

/**
 * On Postgres the per-token window lives in the database: concurrent requests of one token share its
 * writes, a busy token claims places ahead, and each request still gets its own place in the window
 * (the count stays exact: api/plugins/windows.ts).
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

test('a token polled one request after another claims places ahead: a few writes, not one a request', {
  skip: TEST_DATABASE !== 'postgres' && 'the embedded database counts in memory',
}, async () => {
  const u = await h.tenant();
  h.queries.length = 0;
  const COUNT = 100;
  const remaining: number[] = [];
  for (let i = 0; i < COUNT; i++) {
    const reply = await h.request('GET', '/v1/environments', { token: u.token });
    remaining.push(Number(reply.headers['ratelimit-remaining']));
  }
  const writes = h.queries.filter((q) => q.includes('rate_limit_windows'));
  assert.ok(writes.length <= 15, `${writes.length} writes for ${COUNT} requests`);
  // Places 1..100, in order.
  assert.deepEqual(
    remaining,
    Array.from({ length: COUNT }, (_, i) => LIMIT - 1 - i),
  );
});

test('past the limit a token is refused from memory until its window ends', {
  skip: TEST_DATABASE !== 'postgres' && 'the embedded database counts in memory',
}, async (ctx) => {
  const limited = await startHarness({ rateLimitPerMin: 2 });
  ctx.after(() => limited.close());
  const u = await limited.tenant();
  const statuses: number[] = [];
  for (let i = 0; i < 3; i++)
    statuses.push((await limited.request('GET', '/v1/environments', { token: u.token })).status);
  assert.deepEqual(statuses, [200, 200, 429]);
  limited.queries.length = 0;
  for (let i = 0; i < 5; i++) {
    const over = await limited.request('GET', '/v1/environments', { token: u.token });
    assert.equal(over.status, 429);
    assert.ok(Number(over.headers['retry-after']) > 0);
  }
  assert.deepEqual(
    limited.queries.filter((q) => q.includes('rate_limit_windows')),
    [],
  );
});

/**
 * On Postgres the per-token window lives in the database: concurrent requests of one token share its
 * writes, a busy token claims places ahead, and each request still gets its own place in the window
 * (the count stays exact: api/plugins/windows.ts).
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, test } from 'node:test';
import { type Place, SharedWindows } from '../../src/api/plugins/windows.ts';
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

const WINDOW_MS = 60_000;
const turn = () => new Promise((resolve) => setImmediate(resolve));

/** A request's place as the API takes it: at hand (a kept poll), else waiting for a claim. */
const place = async (windows: SharedWindows, key: string, limit: number): Promise<Place> =>
  windows.takeAtHand(key, limit, Date.now()) ?? (await windows.take(key));

test('a key in steady use claims its next places before they run out, so no request waits for a write', {
  skip: TEST_DATABASE !== 'postgres' && 'the embedded database counts in memory',
}, async () => {
  const limit = 100_000;
  const windows = new SharedWindows(h.deps.store.db, WINDOW_MS, limit);
  const key = `steady-${randomUUID()}`;
  const positions: number[] = [];
  // Busy enough that it claims as far ahead as it may (1000 places).
  for (let i = 0; i < 3000; i++) positions.push((await place(windows, key, limit)).position);
  // Every place at hand, taken at once: the next claim has been written meanwhile, unawaited.
  for (
    let at = windows.takeAtHand(key, limit, Date.now());
    at;
    at = windows.takeAtHand(key, limit, Date.now())
  ) {
    positions.push(at.position);
  }
  const deadline = Date.now() + 10_000;
  let next: Place | undefined;
  while (!next && Date.now() < deadline) {
    await turn();
    next = windows.takeAtHand(key, limit, Date.now());
  }
  assert.ok(next, 'no place came to hand without a request waiting for it');
  positions.push(next.position);
  assert.deepEqual(
    positions,
    Array.from({ length: positions.length }, (_, i) => i + 1),
  );
});

test('two processes racing for one key never hand out a place twice, nor more than the limit', {
  skip: TEST_DATABASE !== 'postgres' && 'the embedded database counts in memory',
}, async () => {
  const limit = 2000;
  const key = `raced-${randomUUID()}`;
  const run = async (windows: SharedWindows) => {
    const positions: number[] = [];
    for (let i = 0; i < 1500; i++) {
      positions.push((await place(windows, key, limit)).position);
      if (i % 7 === 0) await turn();
    }
    return positions;
  };
  const [a, b] = await Promise.all([
    run(new SharedWindows(h.deps.store.db, WINDOW_MS, limit)),
    run(new SharedWindows(h.deps.store.db, WINDOW_MS, limit)),
  ]);
  const allowed = [...a, ...b].filter((position) => position <= limit);
  assert.equal(new Set(allowed).size, allowed.length, 'a place handed out twice');
  // Places claimed ahead by one process and not handed out are lost: at most two claims (1/20 of the
  // limit each) per process.
  assert.ok(allowed.length >= limit - 2 * 2 * (limit / 20), `${allowed.length} of ${limit} allowed`);
});

import assert from 'node:assert/strict';
import { type TestContext, test } from 'node:test';
import v8 from 'node:v8';
import { pollUntil } from '../test/helpers/poll.ts';
import { collectWhenIdle, type IdleCollector, oldGenerationUsed } from './idle-collector.ts';

/** A collector that counts its collections instead of collecting, stopped when the test ends. */
function counting(ctx: TestContext, idleMs: number) {
  let collections = 0;
  const collector = collectWhenIdle({
    idleMs,
    collect: () => {
      collections += 1;
    },
  });
  ctx.after(() => collector.stop());
  return { collector, collections: () => collections };
}

/** A request every 10 ms for `ms`. */
async function requestsFor(collector: IdleCollector, ms: number, what: string) {
  const start = Date.now();
  await pollUntil(
    what,
    async () => {
      collector.touch();
      return Date.now() - start > ms ? true : undefined;
    },
    { timeoutMs: 5000, intervalMs: 10 },
  );
}

const oneCollection = (collections: () => number) =>
  pollUntil('the collection once they stop', async () => (collections() === 1 ? true : undefined), {
    timeoutMs: 5000,
    intervalMs: 10,
  });

test('collects once after activity goes quiet, never while idle with nothing new', async (ctx) => {
  const { collector, collections } = counting(ctx, 50);
  collector.touch();
  await pollUntil(
    'a collection after the quiet period',
    async () => (collections() === 1 ? true : undefined),
    {
      timeoutMs: 5000,
      intervalMs: 10,
    },
  );
  // Quiet and nothing new: a second check period passes with no collection.
  const start = Date.now();
  await pollUntil('four check periods', async () => (Date.now() - start > 100 ? true : undefined), {
    intervalMs: 10,
  });
  assert.equal(collections(), 1);
  collector.touch();
  await pollUntil('a second collection', async () => (collections() === 2 ? true : undefined), {
    timeoutMs: 5000,
    intervalMs: 10,
  });
});

test('the default collection is a real one', async (ctx) => {
  const collector = collectWhenIdle({ idleMs: 20 });
  ctx.after(() => collector.stop());
  let finalized = false;
  const registry = new FinalizationRegistry(() => {
    finalized = true;
  });
  registry.register({}, undefined);
  collector.touch();
  await pollUntil('an unreachable object to be collected', async () => (finalized ? true : undefined), {
    timeoutMs: 5000,
    intervalMs: 10,
  });
  assert.ok(registry);
});

test('while quiet, background allocation past the threshold earns another collection', async (ctx) => {
  let collections = 0;
  let used = 100;
  const collector = collectWhenIdle({
    idleMs: 20,
    regrowBytes: 50,
    heapUsed: () => used,
    collect: () => {
      collections += 1;
    },
  });
  ctx.after(() => collector.stop());
  const start = Date.now();
  await pollUntil('several check periods', async () => (Date.now() - start > 80 ? true : undefined), {
    intervalMs: 10,
  });
  assert.equal(collections, 0, 'nothing grew and nothing was served');
  used = 200;
  await pollUntil('a collection for the growth', async () => (collections === 1 ? true : undefined), {
    timeoutMs: 5000,
    intervalMs: 10,
  });
});

test("the start's collection waits for a quiet spell: none while requests come, one after", async (ctx) => {
  // Idle checks far apart: only the quiet spell's collection can happen in this test.
  const { collector, collections } = counting(ctx, 60_000);
  collector.collectWhenQuiet(50);
  await requestsFor(collector, 300, 'six quiet spells of requests');
  assert.equal(collections(), 0);
  await oneCollection(collections);
  const after = Date.now();
  await pollUntil('four quiet spells more', async () => (Date.now() - after > 200 ? true : undefined), {
    intervalMs: 10,
  });
  assert.equal(collections(), 1);
});

test("a collector stopped before the start's quiet spell does not collect", async (ctx) => {
  const { collector, collections } = counting(ctx, 60_000);
  collector.collectWhenQuiet(20);
  collector.stop();
  const start = Date.now();
  await pollUntil('five quiet spells', async () => (Date.now() - start > 100 ? true : undefined), {
    intervalMs: 10,
  });
  assert.equal(collections(), 0);
});

test('regrowth is measured in the old generation: young objects do not count', () => {
  const count = (junk: object[]) => junk.length;
  // Compiled once before measuring: bytecode is allocated in the old generation.
  count(Array.from({ length: 10 }, (_, i) => ({ i })));
  // A scavenge during an attempt empties the young generation of earlier garbage, and the heap as a
  // whole then seems not to grow: another attempt. Both readings come from one attempt, so a measure
  // that counted young objects could not pass.
  const attempts: string[] = [];
  for (let attempt = 0; attempt < 5; attempt++) {
    const oldBefore = oldGenerationUsed();
    const allBefore = v8.getHeapStatistics().used_heap_size;
    const junk = Array.from({ length: 4000 }, (_, i) => ({ i }));
    const allGrowth = v8.getHeapStatistics().used_heap_size - allBefore;
    const oldGrowth = oldGenerationUsed() - oldBefore;
    assert.equal(count(junk), 4000);
    if (allGrowth >= 64 * 1024 && oldGrowth < 32 * 1024) return;
    attempts.push(`the heap grew ${allGrowth} bytes, the old generation ${oldGrowth}`);
  }
  assert.fail(
    `the heap as a whole sees the young objects and the old generation does not: ${attempts.join('; ')}`,
  );
});

test('a server with requests coming never collects, however long they last', async (ctx) => {
  const { collector, collections } = counting(ctx, 200);
  // Five quiet periods' worth.
  await requestsFor(collector, 1000, 'ten quiet periods of requests');
  assert.equal(collections(), 0);
  await oneCollection(collections);
});

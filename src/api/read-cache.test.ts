import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Notifications } from '../store/notifications.ts';
import { type CachedRead, ReadCache } from './read-cache.ts';

/** A read whose loads are counted, each answering the current `version`, held until released when asked. */
function counted(key: string, tags: string[]) {
  const state = { loads: 0, version: 1, hold: undefined as Promise<void> | undefined };
  const spec: CachedRead = {
    key,
    tags,
    load: async () => {
      state.loads++;
      const version = state.version;
      await state.hold;
      return { payload: { version } };
    },
  };
  return { state, spec };
}

const read = (cache: ReadCache, spec: CachedRead) => cache.read(spec, (payload) => JSON.stringify(payload));

test('kept until a change names it; other tags leave it', async () => {
  const cache = new ReadCache(new Notifications(async () => async () => {}));
  cache.up();
  const { state, spec } = counted('a', ['deployment:a']);
  await read(cache, spec);
  await read(cache, spec);
  assert.equal(state.loads, 1);
  cache.notified(['deployment:b', 'service:x']);
  await read(cache, spec);
  assert.equal(state.loads, 1);
  state.version = 2;
  cache.notified(['deployment:a']);
  assert.equal((await read(cache, spec)).body, '{"version":2}');
  assert.equal(state.loads, 2);
});

test('a load that a change overtook is served to who asked before, but not kept; later askers load again', async () => {
  const cache = new ReadCache(new Notifications(async () => async () => {}));
  cache.up();
  const { state, spec } = counted('a', ['deployment:a']);
  let release = () => {};
  state.hold = new Promise((resolve) => {
    release = resolve;
  });
  const first = read(cache, spec);
  const joined = read(cache, spec);
  cache.notified(['deployment:a']);
  state.version = 2;
  state.hold = undefined;
  const after = await read(cache, spec);
  release();
  assert.equal((await first).body, '{"version":1}');
  assert.equal((await joined).body, '{"version":1}', 'asked before the change: may share the older load');
  assert.equal(after.body, '{"version":2}', 'asked after the change: never the older load');
  assert.equal((await read(cache, spec)).body, '{"version":2}');
  assert.equal(state.loads, 2);
});

test('nothing is kept while changes cannot be seen; what can never change is kept throughout', async () => {
  const cache = new ReadCache(new Notifications(async () => async () => {}));
  cache.up();
  const { state, spec } = counted('a', ['deployment:a']);
  const done: CachedRead = {
    key: 'b',
    tags: ['deployment:b'],
    load: async () => ({ payload: 'b', immutable: true }),
  };
  await read(cache, spec);
  await read(cache, done);
  cache.down();
  assert.equal(cache.size, 1, 'only the immutable one is left');
  await read(cache, spec);
  await read(cache, spec);
  assert.equal(state.loads, 3, 'every read loads while down');
  cache.up();
  await read(cache, spec);
  await read(cache, spec);
  assert.equal(state.loads, 4);
});

test('a commit of this process drops everything but the immutable, and overtakes loads under way', async () => {
  const cache = new ReadCache(new Notifications(async () => async () => {}));
  cache.up();
  const { state, spec } = counted('a', ['service:a']);
  let release = () => {};
  state.hold = new Promise((resolve) => {
    release = resolve;
  });
  const pending = read(cache, spec);
  cache.committedHere();
  release();
  await pending;
  state.hold = undefined;
  await read(cache, spec);
  assert.equal(state.loads, 2, 'the overtaken load was not kept');
});

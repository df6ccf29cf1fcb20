import assert from 'node:assert/strict';
import { afterEach, beforeEach, mock, test } from 'node:test';
import { IdleLoops } from './idle-loops.ts';

/** The idle loops of one budget, on mocked timers: which waits a poll, a notification or a stop ends. */
const POLL_MS = 1000;
beforeEach(() => mock.timers.enable({ apis: ['setTimeout'] }));
afterEach(() => mock.timers.reset());

/** Waits of `idle`, each with a flag set once it ended. */
function waits(idle: IdleLoops, count: number) {
  return Array.from({ length: count }, () => {
    const wait = { ended: false };
    idle.wait(POLL_MS).then(() => {
      wait.ended = true;
    });
    return wait;
  });
}
const settle = () => new Promise<void>((resolve) => setImmediate(resolve));
const ended = (list: { ended: boolean }[]) => list.map((w) => w.ended);

test('only the first idle loop polls; the others wait to be woken', async () => {
  const idle = new IdleLoops();
  const list = waits(idle, 3);
  mock.timers.tick(POLL_MS * 10);
  await settle();
  assert.deepEqual(ended(list), [true, false, false]);
  // The poller, back from a claim that found nothing, polls again.
  const again = waits(idle, 1);
  mock.timers.tick(POLL_MS);
  await settle();
  assert.deepEqual(ended([...list, ...again]), [true, false, false, true]);
});

test('a notification wakes one loop; the poll passes to one still waiting, else to the next to wait', async () => {
  const idle = new IdleLoops();
  const list = waits(idle, 3);
  idle.notified();
  await settle();
  assert.deepEqual(ended(list), [true, false, false]);
  // The woken poller found nothing and waits again: the poll went on as it woke, so it is never left to
  // nobody, and it keeps its pace.
  const again = waits(idle, 1);
  mock.timers.tick(POLL_MS);
  await settle();
  assert.deepEqual(ended([...list, ...again]), [true, true, false, false]);
  // A loop that claimed a job hands on: one more wakes.
  assert.equal(idle.wakeOne(), true);
  await settle();
  assert.deepEqual(ended([...list, ...again]), [true, true, true, false]);
  // With no other loop waiting, the woken poller's poll goes to the next to wait.
  const alone = new IdleLoops();
  const only = waits(alone, 1);
  alone.notified();
  await settle();
  const next = waits(alone, 1);
  mock.timers.tick(POLL_MS);
  await settle();
  assert.deepEqual(ended([...only, ...next]), [true, true]);
});

test('a retry coming due is claimed while the poller a notification woke runs a long job', async () => {
  const idle = new IdleLoops();
  const list = waits(idle, 3);
  mock.timers.tick(POLL_MS / 2);
  // The poller takes the job queued and holds it: its poll must not wait for it.
  idle.notified();
  await settle();
  mock.timers.tick(POLL_MS / 2);
  await settle();
  assert.deepEqual(ended(list), [true, true, false]);
  // One poll at a time still: the loop the poll woke is away, and no other timer runs.
  mock.timers.tick(POLL_MS * 10);
  await settle();
  assert.deepEqual(ended(list), [true, true, false]);
});

test('a notification while no loop waits makes the next wait return at once', async () => {
  const idle = new IdleLoops();
  // A loop whose claim started before the job committed finds nothing: it must look again.
  idle.notified();
  const first = waits(idle, 2);
  await settle();
  assert.deepEqual(ended(first), [true, false]);
  idle.wakeAll();
  // A hand-on with nobody waiting leaves nothing behind: every loop is busy and claims when done.
  assert.equal(idle.wakeOne(), false);
  const later = waits(idle, 1);
  await settle();
  assert.deepEqual(ended(later), [false]);
});

test('wakeAll ends every wait, the poller and the others', async () => {
  const idle = new IdleLoops();
  const list = waits(idle, 4);
  idle.wakeAll();
  await settle();
  assert.deepEqual(ended(list), [true, true, true, true]);
});

test('a job coming due before the poll brings the poll forward, and is forgotten once it passes', async () => {
  const idle = new IdleLoops();
  assert.equal(idle.dueKnown, false);
  const list = waits(idle, 2);
  // Told while the poller sleeps: its timer comes forward; a later time changes nothing.
  idle.dueIn(POLL_MS / 4);
  idle.dueIn(POLL_MS / 2);
  assert.equal(idle.dueKnown, true);
  mock.timers.tick(POLL_MS / 4);
  await settle();
  assert.deepEqual(ended(list), [true, false]);
  // The time passed: the next one is for a claim that finds nothing to tell.
  assert.equal(idle.dueKnown, false);
  // Told before the next poller waits (the other loop keeps waiting, with no timer): its timer starts at it.
  idle.dueIn(POLL_MS / 10);
  const more = waits(idle, 1);
  mock.timers.tick(POLL_MS / 10);
  await settle();
  assert.deepEqual(ended([...list, ...more]), [true, false, true]);
  // "None waits on a time" is known too, and leaves the poll at its pace.
  idle.dueIn(undefined);
  assert.equal(idle.dueKnown, true);
  const last = waits(idle, 1);
  mock.timers.tick(POLL_MS - 1);
  await settle();
  assert.deepEqual(ended(last), [false]);
  mock.timers.tick(1);
  await settle();
  assert.deepEqual(ended(last), [true]);
});

import assert from 'node:assert/strict';
import { test } from 'node:test';
import pino from 'pino';
import { pollUntil } from '../../../test/helpers/poll.ts';
import { Schedules } from './schedules.ts';

test('a tick still under way makes the next ticks of its schedule skip, and they run again once it ends', async () => {
  let started = 0;
  let finish: () => void = () => undefined;
  let skipped = 0;
  const logger = pino(
    { level: 'info' },
    { write: (line: string) => void (line.includes('skipped') && skipped++) },
  );
  const schedules = new Schedules(
    logger,
    async () => new Map([['template', '* * * * * *']]),
    () => {
      started++;
      return new Promise<void>((resolve) => {
        finish = resolve;
      });
    },
  );
  await schedules.start();
  try {
    await pollUntil('a tick to start', async () => (started === 1 ? true : undefined), { timeoutMs: 5000 });
    await pollUntil('a later tick to be skipped', async () => (skipped >= 1 ? true : undefined), {
      timeoutMs: 5000,
    });
    assert.equal(started, 1, 'no tick started while the first one ran');
    finish();
    await pollUntil('ticks to run again', async () => (started >= 2 ? true : undefined), { timeoutMs: 5000 });
  } finally {
    schedules.stop();
  }
});

/** A load that answers only when the test lets it: a slow Engine or database. */
function gatedLoad(wanted: Map<string, string>) {
  let open: () => void = () => undefined;
  let gate = Promise.resolve();
  return {
    load: async () => {
      await gate;
      return wanted;
    },
    close: () => {
      gate = new Promise<void>((resolve) => {
        open = resolve;
      });
    },
    open: () => open(),
  };
}

test('a stop while a rescan waits on its load leaves nothing ticking', async () => {
  let ticks = 0;
  const slow = gatedLoad(new Map([['template', '* * * * * *']]));
  const schedules = new Schedules(pino({ level: 'silent' }), slow.load, async () => {
    ticks++;
  });
  slow.close();
  const starting = schedules.start();
  schedules.stop();
  slow.open();
  await starting;
  // Two scheduled seconds pass: a schedule made after the stop would have ticked by then.
  const until = Date.now() + 2200;
  await pollUntil('two seconds after the stop', async () => (Date.now() >= until ? true : undefined), {
    timeoutMs: 5000,
    intervalMs: 100,
  });
  assert.equal(ticks, 0);
});

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

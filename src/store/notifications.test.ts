import assert from 'node:assert/strict';
import { test } from 'node:test';
import { type NotificationSource, Notifications, RECHECK_WHILE_DOWN_MS, TOPICS } from './notifications.ts';

/** A source the test drives: `send` a NOTIFY, take the connection `down` or bring it `up`. */
function driven(startUp = true) {
  let events: Parameters<NotificationSource>[0] | undefined;
  const source: NotificationSource = async (e) => {
    events = e;
    if (startUp) e.up();
    return async () => undefined;
  };
  const notifications = new Notifications(source);
  return {
    notifications,
    send: (channel: string, payload: string) => events?.notify(channel, payload),
    down: () => events?.down(),
    up: () => events?.up(),
  };
}

test('a wait wakes at a notification naming its topic and key, and not at another', async () => {
  const { notifications, send } = driven();
  const { woken } = await notifications.arm([['events', 'account-a']], 10_000);
  let done = false;
  void woken.then(() => {
    done = true;
  });
  send(TOPICS.events, 'account-b');
  send(TOPICS.logs, 'account-a');
  await new Promise((resolve) => setImmediate(resolve));
  assert.equal(done, false, 'another key or another topic leaves it waiting');
  send(TOPICS.events, 'account-a');
  assert.equal(await woken, true);
  assert.equal(notifications.armed, 0);
});

test('a wait on several topics wakes at any; a payload of several keys wakes each', async () => {
  const { notifications, send } = driven();
  const first = await notifications.arm(
    [
      ['logs', 'd1'],
      ['changes', 'deployment:d1'],
    ],
    10_000,
  );
  const second = await notifications.arm([['changes', 'service:s1']], 10_000);
  send(TOPICS.changes, 'deployment:d1 service:s1');
  assert.deepEqual(await Promise.all([first.woken, second.woken]), [true, true]);
});

test('a wait ends false at its timeout and when its signal aborts', async () => {
  const { notifications } = driven();
  assert.equal(await (await notifications.arm([['jobs', '']], 20)).woken, false);
  const abort = new AbortController();
  const { woken } = await notifications.arm([['jobs', '']], 10_000, abort.signal);
  abort.abort();
  assert.equal(await woken, false);
  assert.equal(notifications.armed, 0);
});

test('while notifications cannot be heard, waits end true so that their callers look for themselves', async () => {
  const { notifications, down, up } = driven();
  const { woken } = await notifications.arm([['events', 'a']], 60_000);
  down();
  assert.equal(await woken, true, 'a connection going down wakes every wait');
  const started = Date.now();
  const whileDown = await notifications.arm([['events', 'a']], 60_000);
  assert.equal(await whileDown.woken, true);
  const took = Date.now() - started;
  assert.ok(took >= RECHECK_WHILE_DOWN_MS - 50 && took < 5000, `rechecked after ${took} ms`);
  up();
  assert.equal(await (await notifications.arm([['events', 'a']], 30)).woken, false, 'up: the full wait');
});

test('subscribers hear their topic only, and down and up', async () => {
  const { notifications, send, down, up } = driven();
  const heard: string[] = [];
  const stop = notifications.subscribe('access', {
    notified: (keys) => heard.push(...keys),
    down: () => heard.push('down'),
    up: () => heard.push('up'),
  });
  await notifications.start();
  send(TOPICS.access, 'token:t1');
  send(TOPICS.events, 'account-a');
  down();
  up();
  stop();
  send(TOPICS.access, 'token:t2');
  assert.deepEqual(heard, ['up', 'token:t1', 'down', 'up']);
});

test('closing ends every wait as if its time had passed', async () => {
  const { notifications } = driven();
  const { woken } = await notifications.arm([['logs', 'd']], 60_000);
  await notifications.close();
  assert.equal(await woken, false);
});

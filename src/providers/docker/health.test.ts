import assert from 'node:assert/strict';
import net from 'node:net';
import { PassThrough } from 'node:stream';
import { test } from 'node:test';
import type Docker from 'dockerode';
import { type Target, waitReady } from './health.ts';

/** An engine of one running container whose `die` events the test sends on its event stream. */
function fakeEngine() {
  const events = new PassThrough();
  const state = { Running: true, Restarting: false, ExitCode: 0 };
  const container = {
    id: 'c0ffee',
    inspect: async () => ({ State: state, RestartCount: 0 }),
  } as unknown as Docker.Container;
  const docker = { getEvents: async () => events } as unknown as Docker;
  const die = (code: number) => {
    state.Running = false;
    state.ExitCode = code;
    events.write(`${JSON.stringify({ status: 'die', id: 'c0ffee' })}\n`);
  };
  return { docker, container, die };
}

/** A port that accepts connections only after `ms`. */
async function portOpeningAfter(ms: number): Promise<{ port: number; close: () => void }> {
  const probe = net.createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const { port } = probe.address() as net.AddressInfo;
  await new Promise<void>((resolve) => probe.close(() => resolve()));
  const server = net.createServer((socket) => socket.destroy());
  const timer = setTimeout(() => server.listen(port, '127.0.0.1'), ms);
  return {
    port,
    close: () => {
      clearTimeout(timer);
      server.close();
    },
  };
}

test('a replica is seen ready soon after its port opens: checks back off finely, not on a fixed half second', async () => {
  const { docker, container } = fakeEngine();
  const opening = await portOpeningAfter(300);
  try {
    const target: Target = { container, ip: '127.0.0.1' };
    const started = Date.now();
    let readyAt = 0;
    const ready = await waitReady(
      docker,
      [target],
      null,
      opening.port,
      Date.now() + 10_000,
      AbortSignal.timeout(10_000),
      () => {
        readyAt = Date.now();
      },
    );
    assert.deepEqual(ready, { ok: true });
    // Probes at 0, 10, 30, 70, 150, 310 ms...: the first after 300 ms finds it. Half-second steps would see it at 500.
    assert.ok(readyAt - started < 450, `ready after ${readyAt - started} ms`);
  } finally {
    opening.close();
  }
});

test('a replica that exits while its checks fail ends the wait at once, from the engine event, with its code', async () => {
  const { docker, container, die } = fakeEngine();
  const closed = await portOpeningAfter(60_000);
  try {
    const target: Target = { container, ip: '127.0.0.1' };
    // Between two probes (at 1060 and 1310 ms): polling would see it up to 160 ms late, the event at once.
    let diedAt = 0;
    setTimeout(() => {
      diedAt = Date.now();
      die(3);
    }, 1150);
    const ready = await waitReady(
      docker,
      [target],
      null,
      closed.port,
      Date.now() + 30_000,
      AbortSignal.timeout(30_000),
    );
    assert.equal(ready.ok, false);
    assert.ok(!ready.ok && ready.reason === 'a replica exited with code 3', JSON.stringify(ready));
    assert.ok(!ready.ok && ready.exited === target);
    assert.ok(Date.now() - diedAt < 100, `seen ${Date.now() - diedAt} ms after the exit`);
  } finally {
    closed.close();
  }
});

test('a slow starter still gets its deploy_timeout: ready when it opens seconds later, and failed only once the deadline has passed', async () => {
  const { docker, container } = fakeEngine();
  const target: Target = { container, ip: '127.0.0.1' };
  // Opens after 2.5 s, well past the finest pauses: the checks keep going at their 250 ms ceiling.
  const slow = await portOpeningAfter(2_500);
  try {
    const started = Date.now();
    const ready = await waitReady(
      docker,
      [target],
      null,
      slow.port,
      started + 10_000,
      AbortSignal.timeout(20_000),
    );
    assert.deepEqual(ready, { ok: true });
    assert.ok(Date.now() - started >= 2_400, 'ready once it opened, not before');
  } finally {
    slow.close();
  }
  // Never opens: the wait runs to its deadline, not a fixed number of probes, and says why.
  const never = await portOpeningAfter(60_000);
  try {
    const started = Date.now();
    const ready = await waitReady(
      docker,
      [target],
      null,
      never.port,
      started + 1_500,
      AbortSignal.timeout(20_000),
    );
    assert.equal(ready.ok, false);
    assert.match(
      ready.ok ? '' : ready.reason,
      /1 of 1 replicas not ready in time: port \d+ did not accept connections/,
    );
    assert.ok(Date.now() - started >= 1_500, `failed after ${Date.now() - started} ms, before its deadline`);
  } finally {
    never.close();
  }
});

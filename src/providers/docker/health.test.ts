import assert from 'node:assert/strict';
import http from 'node:http';
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

/** An HTTP health check's target that fails its first `failures` probes (503) and passes after; probes timed. */
async function passingAfter(
  failures: number,
): Promise<{ port: number; probes: number[]; close: () => void }> {
  const probes: number[] = [];
  const server = http.createServer((_req, res) => {
    probes.push(performance.now());
    res.writeHead(probes.length > failures ? 200 : 503).end();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  return { port, probes, close: () => server.close() };
}

test('checks back off finely, not on a fixed half second: six probes come within five half-second pauses', async () => {
  const { docker, container } = fakeEngine();
  const target = await passingAfter(5);
  try {
    const ready = await waitReady(
      docker,
      [{ container, ip: '127.0.0.1' }],
      { type: 'http', path: '/', timeout: 10 },
      target.port,
      Date.now() + 30_000,
      AbortSignal.timeout(30_000),
    );
    assert.deepEqual(ready, { ok: true });
    assert.equal(target.probes.length, 6);
    // Pauses of 10, 20, 40, 80 and 160 ms: 310 ms between the first probe and the sixth. Steps of half a
    // second cannot take less than 2.5 s whatever the machine's load; the doubling exceeds it only if
    // each of its pauses and probes runs hundreds of milliseconds late.
    const spread = (target.probes[5] as number) - (target.probes[0] as number);
    assert.ok(spread < 2_500, `six probes over ${Math.round(spread)} ms`);
  } finally {
    target.close();
  }
});

test('a replica that exits while its checks fail ends the wait at once, from the engine event, with its code', async () => {
  const { docker, container, die } = fakeEngine();
  const closed = await portOpeningAfter(60_000);
  try {
    const target: Target = { container, ip: '127.0.0.1' };
    // The exit comes while the checks pause (past 1060 ms they pause 250 ms). The event ends the wait
    // within the same turn of the event loop: before an immediate set at the exit runs. Polling would see
    // it only once its pause's timer fires, in a later turn, however fast or loaded the machine.
    let turnsAfterExit = 0;
    setTimeout(() => {
      die(3);
      setImmediate(() => {
        turnsAfterExit++;
      });
    }, 1150);
    const ready = await waitReady(
      docker,
      [target],
      null,
      closed.port,
      Date.now() + 30_000,
      AbortSignal.timeout(30_000),
    );
    assert.equal(turnsAfterExit, 0, 'the wait ended in the turn of the exit event');
    assert.equal(ready.ok, false);
    assert.ok(!ready.ok && ready.reason === 'a replica exited with code 3', JSON.stringify(ready));
    assert.ok(!ready.ok && ready.exited === target);
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

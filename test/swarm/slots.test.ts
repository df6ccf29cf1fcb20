import assert from 'node:assert/strict';
import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import { once } from 'node:events';
import { test } from 'node:test';
import { pollUntil } from '../helpers/poll.ts';

/**
 * Test swarms of runs side by side (two checkouts, files run concurrently) take slots of their own, so
 * one never takes down the other's bridge and engines; a slot pinned by BERTH_SWARM_SLOT is waited for.
 */
const HELPER = new URL('../helpers/swarm.ts', import.meta.url).pathname;

/** A process holding a swarm slot until its stdin closes; what it printed so far. */
function holder(env: Record<string, string> = {}) {
  const child = spawn(
    process.execPath,
    [
      '--input-type=module',
      '--eval',
      `import { swarmSlot } from ${JSON.stringify(HELPER)}; console.log(await swarmSlot()); process.stdin.resume();`,
    ],
    { env: { ...process.env, BERTH_SWARM_SLOT: undefined, ...env } },
  );
  const output = { out: '', err: '' };
  child.stdout.on('data', (chunk) => (output.out += chunk));
  child.stderr.on('data', (chunk) => (output.err += chunk));
  const slot = () => pollUntil('a slot', async () => output.out.trim() || undefined);
  return { child, output, slot };
}

async function release(child: ChildProcessWithoutNullStreams): Promise<void> {
  child.stdin.end();
  if (child.exitCode === null) await once(child, 'exit');
}

test('runs side by side take slots of their own; a pinned slot is waited for', async () => {
  const first = holder();
  const second = holder();
  const [a, b] = [await first.slot(), await second.slot()];
  assert.notEqual(a, b);
  const pinned = holder({ BERTH_SWARM_SLOT: a });
  await pollUntil('the pinned run to say it waits', async () =>
    pinned.output.err.includes(`swarm slot ${a} (BERTH_SWARM_SLOT) is in use by another run`)
      ? true
      : undefined,
  );
  assert.equal(pinned.output.out, '');
  await release(first.child);
  assert.equal(await pinned.slot(), a);
  await release(second.child);
  await release(pinned.child);
});

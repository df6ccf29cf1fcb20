import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { ensurePauseImage, PAUSE_COMMAND, pauseSupported } from '../../src/providers/docker/pause-image.ts';
import { docker, requireDocker } from '../helpers/docker.ts';
import { pollUntil } from '../helpers/poll.ts';

/** Berth's own network sandbox image: imported from nothing but Berth, it runs until asked to stop. */
let architecture = '';
const made: string[] = [];

before(async () => {
  await requireDocker();
  architecture = (await docker.info()).Architecture;
});
after(async () => {
  for (const id of made)
    await docker
      .getContainer(id)
      .remove({ force: true })
      .catch(() => undefined);
});

test('the pause image imports once, keeps running, and stops promptly with status 0 on SIGTERM and on SIGINT', async (t) => {
  if (!pauseSupported(architecture)) return t.skip(`no pause program for ${architecture}`);
  const image = await ensurePauseImage(docker, architecture);
  assert.match(image ?? '', /^berth\/sandbox:[0-9a-f]{16}$/);
  // Present, it is found again, not imported anew.
  assert.equal(await ensurePauseImage(docker, architecture), image);

  for (const signal of ['SIGTERM', 'SIGINT']) {
    const container = await docker.createContainer({
      Image: image as string,
      Cmd: PAUSE_COMMAND,
      StopSignal: signal,
      HostConfig: { NetworkMode: 'none' },
    });
    made.push(container.id);
    await container.start();
    // Still running a while after start: it waits, not exits.
    await pollUntil(
      'the container to run',
      async () => (await container.inspect()).State.Running || undefined,
    );
    const began = Date.now();
    await container.stop({ t: 10 });
    const stopped = Date.now() - began;
    const state = (await container.inspect()).State;
    assert.equal(state.ExitCode, 0, `${signal}: exit code`);
    // It ran until the stop, not exited by itself before it.
    assert.ok(
      new Date(state.FinishedAt).getTime() >= began - 100,
      `${signal}: finished at ${state.FinishedAt}`,
    );
    // The Engine would kill it after 10 s: it left on the signal well before.
    assert.ok(stopped < 5_000, `${signal}: stopped in ${stopped} ms`);
  }
});

test('an Engine architecture without a pause program has no image (sandboxes stay off there)', async () => {
  assert.equal(pauseSupported('riscv64'), false);
  assert.equal(await ensurePauseImage(docker, 'riscv64'), null);
});

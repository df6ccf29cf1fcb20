import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { pollUntil } from '../../../test/helpers/poll.ts';
import { pauseTar } from './pause-image.ts';

/**
 * The pause program of every architecture Berth makes a sandbox image for, run as a process: natively
 * on its own architecture, else under QEMU's user-mode emulator (Debian's qemu-user-static, which CI
 * installs), so the hand-assembled aarch64 code is run here, not only read.
 */
const dir = mkdtempSync(join(tmpdir(), 'berth-pause-'));
after(() => rmSync(dir, { recursive: true, force: true }));

const NATIVE: Record<string, string> = { x64: 'x86_64', arm64: 'aarch64' };

function runner(architecture: string): string[] | null {
  if (NATIVE[process.arch] === architecture) return [];
  const emulator = `qemu-${architecture}-static`;
  return spawnSync(emulator, ['--version']).status === 0 ? [emulator] : null;
}

/** Unpacked by the system's tar, so the archive Berth writes by hand is read as any tar reads it. */
function program(architecture: string): string {
  const archive = join(dir, `${architecture}.tar`);
  writeFileSync(archive, pauseTar(architecture));
  const listed = spawnSync('tar', ['-tvf', archive], { encoding: 'utf8' });
  assert.equal(listed.status, 0, listed.stderr);
  assert.match(listed.stdout, /^-rwxr-xr-x 0\/0 .* pause\n$/);
  const out = join(dir, architecture);
  const unpacked = spawnSync('tar', ['-xOf', archive, 'pause']);
  assert.equal(unpacked.status, 0);
  writeFileSync(out, unpacked.stdout, { mode: 0o755 });
  assert.deepEqual(readFileSync(out).subarray(0, 4), Buffer.from([0x7f, 0x45, 0x4c, 0x46]));
  return out;
}

/** The kernel's state letter of a process: S while it waits in rt_sigtimedwait. */
function stateOf(pid: number): string | undefined {
  try {
    return readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.[0];
  } catch {
    return undefined;
  }
}

for (const architecture of ['x86_64', 'aarch64']) {
  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    test(`${architecture}: the pause program waits, survives a stop and continue, and exits 0 on ${signal}`, async (t) => {
      const prefix = runner(architecture);
      if (!prefix) {
        assert.ok(!process.env.CI, `CI installs qemu-user-static to run the ${architecture} program`);
        return t.skip(`neither ${architecture} nor qemu-${architecture}-static here`);
      }
      const path = program(architecture);
      const [command = path, ...args] = [...prefix, path];
      const child = spawn(command, args, { stdio: 'ignore' });
      const exited = new Promise<number | string | null>((resolve) =>
        child.once('exit', (code, killedBy) => resolve(code ?? killedBy)),
      );
      const pid = child.pid as number;
      await pollUntil('the program to wait', async () => (stateOf(pid) === 'S' ? true : undefined));
      // A stop and continue ends the wait early (EINTR): it waits again rather than exiting.
      process.kill(pid, 'SIGSTOP');
      await pollUntil('the program to stop', async () => (stateOf(pid) === 'T' ? true : undefined));
      process.kill(pid, 'SIGCONT');
      await pollUntil('the program to wait again', async () => (stateOf(pid) === 'S' ? true : undefined));
      assert.equal(child.exitCode, null);
      process.kill(pid, signal);
      assert.equal(await exited, 0);
    });
  }
}

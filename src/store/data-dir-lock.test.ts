import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, afterEach, describe, test } from 'node:test';
import { pollUntil } from '../../test/helpers/poll.ts';
import { type DataDirLock, DataDirLockedError, lockDataDir } from './data-dir-lock.ts';

const tempDirs: string[] = [];
const held: DataDirLock[] = [];
const children: ChildProcess[] = [];

function tempDir(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-lock-'));
  tempDirs.push(dir);
  return dir;
}

async function lock(dir: string): Promise<DataDirLock> {
  const l = await lockDataDir(dir);
  held.push(l);
  return l;
}

afterEach(async () => {
  for (const l of held.splice(0)) await l.release();
  for (const child of children.splice(0)) {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  }
});
after(() => {
  for (const dir of tempDirs) fs.rmSync(dir, { recursive: true, force: true });
});

/** Asserts that locking `dir` is refused with a DataDirLockedError, and returns its message. */
async function assertRefused(dir: string): Promise<string> {
  let message = '';
  await assert.rejects(lockDataDir(dir), (error: Error) => {
    assert.ok(error instanceof DataDirLockedError, `expected DataDirLockedError, got ${error}`);
    message = error.message;
    return true;
  });
  return message;
}

const MODULE_URL = new URL('./data-dir-lock.ts', import.meta.url).href;

/** Starts a child process that locks `dir`, and resolves once it says 'locked'. */
async function childHoldingLock(dir: string): Promise<ChildProcess> {
  const script = [
    `import { lockDataDir } from ${JSON.stringify(MODULE_URL)};`,
    `await lockDataDir(${JSON.stringify(dir)});`,
    `process.stdout.write('locked\\n');`,
    'setInterval(() => {}, 1 << 30);',
  ].join('\n');
  const child = spawn(process.execPath, ['--input-type=module', '-e', script], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  let stdout = '';
  let stderr = '';
  child.stderr?.on('data', (chunk) => {
    stderr += chunk;
  });
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`child did not lock in time; stderr: ${stderr}`)),
      20_000,
    );
    child.stdout?.on('data', (chunk) => {
      stdout += chunk;
      if (stdout.includes('locked\n')) {
        clearTimeout(timer);
        resolve();
      }
    });
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`child exited (${code ?? signal}) before locking; stderr: ${stderr}`));
    });
  });
  return child;
}

describe('lockDataDir', () => {
  test('creates a missing data directory and records the owner pid', async () => {
    const dir = path.join(tempDir(), 'data');
    await lock(dir);
    assert.ok(fs.statSync(dir).isDirectory());
    assert.equal(fs.readFileSync(path.join(dir, 'berth.lock'), 'utf8').trim(), String(process.pid));
  });

  test('a second lock in the same process is refused, naming the directory and what to do', async () => {
    const dir = tempDir();
    await lock(dir);
    const message = await assertRefused(dir);
    assert.ok(message.includes(fs.realpathSync(dir)), message);
    assert.ok(message.includes(`pid ${process.pid}`), message);
    assert.match(message, /stop that process/);
    assert.match(message, /BERTH_DATA_DIR/);
  });

  test('after release the lock can be taken again', async () => {
    const dir = tempDir();
    const first = await lockDataDir(dir);
    await assertRefused(dir);
    await first.release();
    const second = await lock(dir);
    assert.ok(second);
    await assertRefused(dir);
  });

  test('locks on different directories do not interfere', async () => {
    await lock(tempDir());
    await lock(tempDir());
  });

  test('the same directory reached through a symlink is still refused', async () => {
    const dir = tempDir();
    const link = path.join(tempDir(), 'link-to-data');
    fs.symlinkSync(dir, link, 'dir');
    await lock(dir);
    const message = await assertRefused(link);
    assert.ok(message.includes(fs.realpathSync(dir)), message);
  });

  test('a lock taken through a symlink refuses the real path', async () => {
    const dir = tempDir();
    const link = path.join(tempDir(), 'link-to-data');
    fs.symlinkSync(dir, link, 'dir');
    await lock(link);
    await assertRefused(dir);
  });

  test('a directory path with a trailing slash or dot segments is the same directory', async () => {
    const dir = tempDir();
    await lock(dir);
    await assertRefused(`${dir}/`);
    await assertRefused(`${dir}/.`);
    await assertRefused(`${path.dirname(dir)}/../${path.basename(path.dirname(dir))}/${path.basename(dir)}`);
  });

  test('a lock held by a child process refuses the parent; after SIGKILL the parent can take it', async () => {
    const dir = tempDir();
    const child = await childHoldingLock(dir);
    const message = await assertRefused(dir);
    assert.ok(message.includes(fs.realpathSync(dir)), message);
    assert.ok(message.includes(`pid ${child.pid}`), message);

    const exited = new Promise((resolve) => child.once('exit', resolve));
    assert.ok(child.kill('SIGKILL'));
    await exited;

    const taken = await pollUntil('the lock to be free after the child was killed', () => lock(dir), {
      timeoutMs: 10_000,
    });
    assert.ok(taken);
    await assertRefused(dir);
  });

  test('a lock held by a child refuses the parent through a symlink too', async () => {
    const dir = tempDir();
    const link = path.join(tempDir(), 'link');
    fs.symlinkSync(dir, link, 'dir');
    await childHoldingLock(link);
    await assertRefused(dir);
    await assertRefused(link);
  });
});

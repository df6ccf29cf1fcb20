/**
 * An exclusive lock on the embedded database directory, held for the life of the process. Two PGlite
 * processes on one directory destroy it, so a second process must refuse before it opens any file.
 *
 * On Linux the lock is a listening socket in the abstract namespace named after the directory's real
 * path: binding is atomic, and the kernel frees the name the moment the owner dies, SIGKILL included,
 * so a lock can never be stale. Elsewhere a pid file created with O_EXCL stands in, taken over when its
 * pid is no longer alive. `berth.lock` holds the owner's pid either way, for the error message.
 * @module
 */
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';

export class DataDirLockedError extends Error {}

export interface DataDirLock {
  release(): Promise<void>;
}

function lockedMessage(dir: string, pidFile: string): string {
  let owner = 'unknown';
  try {
    owner = fs.readFileSync(pidFile, 'utf8').trim() || owner;
  } catch {
    // The owner has not written it yet.
  }
  return (
    `The data directory ${dir} is in use by another Berth process (pid ${owner}). ` +
    'The embedded database allows one process at a time: stop that process, use another BERTH_DATA_DIR, ' +
    'or talk to the running server through its HTTP API (berth admin ... does that).'
  );
}

async function lockWithAbstractSocket(dir: string, pidFile: string): Promise<DataDirLock> {
  const name = `\0berth-lock-${createHash('sha256').update(dir).digest('hex').slice(0, 32)}`;
  const server = net.createServer((socket) => socket.destroy());
  await new Promise<void>((resolve, reject) => {
    server.once('error', (error: NodeJS.ErrnoException) =>
      reject(error.code === 'EADDRINUSE' ? new DataDirLockedError(lockedMessage(dir, pidFile)) : error),
    );
    server.listen(name, resolve);
  });
  server.unref();
  fs.writeFileSync(pidFile, `${process.pid}\n`, { mode: 0o600 });
  return {
    release: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

function pidAlive(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

function lockWithPidFile(dir: string, pidFile: string): DataDirLock {
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      fs.writeFileSync(pidFile, `${process.pid}\n`, { flag: 'wx', mode: 0o600 });
      return { release: async () => fs.rmSync(pidFile, { force: true }) };
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    }
    const owner = Number.parseInt(fs.readFileSync(pidFile, 'utf8'), 10);
    if (pidAlive(owner)) throw new DataDirLockedError(lockedMessage(dir, pidFile));
    fs.rmSync(pidFile, { force: true });
  }
  throw new DataDirLockedError(lockedMessage(dir, pidFile));
}

export async function lockDataDir(dataDir: string): Promise<DataDirLock> {
  fs.mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  const dir = fs.realpathSync(dataDir);
  const pidFile = path.join(dir, 'berth.lock');
  return process.platform === 'linux' ? lockWithAbstractSocket(dir, pidFile) : lockWithPidFile(dir, pidFile);
}

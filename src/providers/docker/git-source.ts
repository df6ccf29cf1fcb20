import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { TerminalError } from '../../jobs/errors.ts';

const run = promisify(execFile);

export interface Checkout {
  dir: string;
  commit: string;
  remove(): void;
}

/**
 * Clones `org/repo` from BERTH_GIT_BASE_URL and checks out the commit (or the branch head). git runs
 * with an argument list, never through a shell; a clone that fails is a terminal deployment failure
 * with git's own words as the reason.
 */
export async function checkout(
  baseUrl: string,
  repo: string,
  branch: string,
  commit: string,
): Promise<Checkout> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-src-'));
  const remove = () => fs.rmSync(dir, { recursive: true, force: true });
  const url = `${baseUrl.replace(/\/?$/, '/')}${repo}`;
  try {
    await run('git', ['clone', '--quiet', '--branch', branch, '--', url, dir], { timeout: 300_000 });
    if (commit)
      await run('git', ['-C', dir, 'checkout', '--quiet', '--detach', commit, '--'], { timeout: 60_000 });
    const { stdout } = await run('git', ['-C', dir, 'rev-parse', 'HEAD']);
    return { dir, commit: stdout.trim(), remove };
  } catch (error) {
    remove();
    const detail = ((error as { stderr?: string }).stderr || (error as Error).message)
      .trim()
      .split('\n')
      .at(-1);
    throw new TerminalError(`git could not check out ${repo}@${commit || branch}: ${detail}`);
  }
}

/** Every file under `dir` (relative paths, .git left out): the build context sent to Docker. */
export function contextFiles(dir: string): string[] {
  return fs
    .readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter(
      (entry) => entry.isFile() && !path.relative(dir, entry.parentPath).split(path.sep).includes('.git'),
    )
    .map((entry) => path.relative(dir, path.join(entry.parentPath, entry.name)));
}

/** `inner` resolved against `root`, refused when it climbs out of it. */
export function inside(root: string, inner: string, what: string): string {
  const resolved = path.resolve(root, inner);
  if (resolved !== root && !resolved.startsWith(root + path.sep)) {
    throw new TerminalError(`${what} ${inner} is outside the repository`);
  }
  return resolved;
}

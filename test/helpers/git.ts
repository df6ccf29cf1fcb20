import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';

/** Local git repositories that BERTH_GIT_BASE_URL=file://... serves to the docker provider. */
const run = promisify(execFile);

export const GIT_AUTHOR = 'Berth Test <test@berth.invalid>';

export async function git(cwd: string, ...args: string[]): Promise<string> {
  const { stdout } = await run(
    'git',
    ['-c', 'user.name=Berth Test', '-c', 'user.email=test@berth.invalid', ...args],
    { cwd },
  );
  return stdout.trim();
}

/**
 * A bare repository `{root}/{name}` (branch main) and one commit per release, each writing the given
 * files (path to content) on top of the previous ones. Returns the commit ids, oldest first.
 */
export async function createRepo(
  root: string,
  name: string,
  releases: { message: string; files: Record<string, string> }[],
): Promise<string[]> {
  const bare = path.join(root, name);
  const work = fs.mkdtempSync(path.join(root, 'work-'));
  fs.mkdirSync(bare, { recursive: true });
  await git(bare, 'init', '--quiet', '--bare', '--initial-branch=main');
  await git(root, 'clone', '--quiet', bare, work);
  const commits: string[] = [];
  for (const release of releases) {
    for (const [file, content] of Object.entries(release.files)) {
      fs.mkdirSync(path.dirname(path.join(work, file)), { recursive: true });
      fs.writeFileSync(path.join(work, file), content);
    }
    await git(work, 'add', '-A');
    await git(work, 'commit', '--quiet', '-m', release.message);
    commits.push(await git(work, 'rev-parse', 'HEAD'));
  }
  await git(work, 'push', '--quiet', 'origin', 'main');
  fs.rmSync(work, { recursive: true, force: true });
  return commits;
}

/** Pushes one more commit onto `branch` of the bare repository `{root}/{name}`; returns its id. */
export async function pushCommit(
  root: string,
  name: string,
  release: { message: string; files: Record<string, string> },
  branch = 'main',
): Promise<string> {
  const work = fs.mkdtempSync(path.join(root, 'work-'));
  await git(root, 'clone', '--quiet', '--branch', branch, path.join(root, name), work);
  for (const [file, content] of Object.entries(release.files)) {
    fs.mkdirSync(path.dirname(path.join(work, file)), { recursive: true });
    fs.writeFileSync(path.join(work, file), content);
  }
  await git(work, 'add', '-A');
  await git(work, 'commit', '--quiet', '-m', release.message);
  const commit = await git(work, 'rev-parse', 'HEAD');
  await git(work, 'push', '--quiet', 'origin', branch);
  fs.rmSync(work, { recursive: true, force: true });
  return commit;
}

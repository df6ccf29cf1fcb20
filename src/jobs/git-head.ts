import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { type GitAccess, gitEnv } from '../domain/git-auth.ts';

const run = promisify(execFile);

/** The head of `branch` at `url`, asked with `git ls-remote` (no clone), or undefined when the branch is gone. */
export async function branchHead(
  url: string,
  branch: string,
  access: GitAccess | undefined,
  timeoutMs: number,
): Promise<string | undefined> {
  const ref = `refs/heads/${branch}`;
  const { stdout } = await run('git', ['ls-remote', '--', url, ref], {
    env: gitEnv(access),
    timeout: timeoutMs,
  });
  return stdout
    .split('\n')
    .find((line) => line.endsWith(`\t${ref}`))
    ?.split('\t')[0];
}

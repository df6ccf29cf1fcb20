import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { GIT_ACCESS_REFUSED, type GitAccess, gitEnv, repoUrl } from '../../domain/git-auth.ts';
import { GIT_REPO_NAME_RULE, isGitRepoName } from '../../domain/git-repo-name.ts';
import { TerminalError } from '../../jobs/errors.ts';
import { failure } from '../provider.ts';

const run = promisify(execFile);

export interface Checkout {
  dir: string;
  commit: string;
  /** `Name <email>` */
  author: string;
  message: string;
  remove(): void;
}

/**
 * git's words for a failure that the network or the server caused, and that may pass: such a clone is
 * retried. Every other failure (no such repository, branch or commit, access refused) is the
 * deployment's own and fails it at once.
 */
const TRANSIENT_GIT =
  /could not resolve host|connection (refused|reset|timed out)|timed out|early eof|the remote end hung up|returned error: 5\d\d|temporary failure|network is unreachable|ETIMEDOUT|ECONNRESET/i;

/**
 * Clones `org/repo` (from the connection's host with its credential, else anonymously from
 * BERTH_GIT_BASE_URL) and checks out the commit (or the branch head). git runs with an argument list,
 * never through a shell, and gets the credential through its environment (domain/git-auth.ts); git's
 * own words are the reason of a failure, and they never hold the credential.
 */
export async function checkout(request: {
  baseUrl: string;
  repo: string;
  branch: string;
  commit: string;
  access?: GitAccess | undefined;
}): Promise<Checkout> {
  const { repo, branch, commit, access } = request;
  // Rows stored before the API checked names (or written around it) must not reach outside the base.
  if (!isGitRepoName(repo)) throw new TerminalError(`${GIT_REPO_NAME_RULE}; got ${repo}`);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-src-'));
  const remove = () => fs.rmSync(dir, { recursive: true, force: true });
  const url = repoUrl(access?.baseUrl ?? request.baseUrl, repo);
  const env = gitEnv(access);
  try {
    await run('git', ['clone', '--quiet', '--branch', branch, '--', url, dir], { timeout: 300_000, env });
    if (commit && !(await exists(dir, commit))) {
      remove();
      throw new TerminalError(`commit ${commit} does not exist in ${repo} (looked on branch ${branch})`);
    }
    if (commit)
      await run('git', ['-C', dir, 'checkout', '--quiet', '--detach', commit, '--'], {
        timeout: 60_000,
        env,
      });
    // The commit deployed, whatever named it (an id, a short id, the branch head). NUL cannot occur in
    // any of the three, so it separates them.
    const { stdout } = await run('git', ['-C', dir, 'log', '-1', '--format=%H%x00%an <%ae>%x00%B'], { env });
    const [id = '', author = '', message = ''] = stdout.split('\0');
    return { dir, commit: id, author, message: message.trim(), remove };
  } catch (error) {
    remove();
    if (error instanceof TerminalError) throw error;
    const said = ((error as { stderr?: string }).stderr || (error as Error).message).trim();
    const last = said.split('\n').at(-1);
    if (GIT_ACCESS_REFUSED.test(said)) {
      throw new TerminalError(
        access
          ? `git could not read ${repo} with the service's connection: the host refused its credential (${last})`
          : `git could not read ${repo}: the host asks for a credential; give the service an installation_id naming a git connection that can read it (${last})`,
      );
    }
    const killed = (error as { killed?: boolean }).killed === true;
    throw failure(`git could not check out ${repo}@${commit || branch}: ${last}`, {
      retryable: killed || TRANSIENT_GIT.test(said),
    });
  }
}

/** Whether `commit` names a commit of the clone (an id or a short id; any branch fetched). */
async function exists(dir: string, commit: string): Promise<boolean> {
  try {
    await run('git', ['-C', dir, 'rev-parse', '--quiet', '--verify', `${commit}^{commit}`]);
    return true;
  } catch {
    return false;
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

/** What the kernel allows before it reports a loop (Linux MAXSYMLINKS). */
const MAX_LINKS = 40;

/**
 * `inner` resolved against `root` as the kernel would, one component at a time, following symbolic
 * links only while they stay inside `root`. A component that climbs out, or a link that points out
 * (any absolute target, or `..` past the root), is refused without looking at what it points to: the
 * answer is the same whether the host path exists or not, and never names it. The result is a path
 * with no links left (or one that cannot be opened, when a component does not exist), so reading it
 * reads what was checked.
 */
export function inside(root: string, inner: string, what: string): string {
  const base = fs.realpathSync(root);
  const refuse = (why: string) => new TerminalError(`${what} ${inner} ${why}`);
  const outside = () => refuse('is outside the repository');
  if (path.isAbsolute(inner)) throw outside();
  const pending = components(inner);
  let current = base;
  let links = 0;
  for (let part = pending.shift(); part !== undefined; part = pending.shift()) {
    if (part === '..') {
      if (current === base) throw outside();
      current = path.dirname(current);
      continue;
    }
    const next = path.join(current, part);
    const stat = fs.lstatSync(next, { throwIfNoEntry: false });
    // Missing, or a file with more to come: joined without normalizing, so any open fails at `next`.
    if (!stat || (!stat.isDirectory() && !stat.isSymbolicLink() && pending.length > 0)) {
      return [next, ...pending].join(path.sep);
    }
    if (stat.isSymbolicLink()) {
      if (++links > MAX_LINKS) throw refuse('has too many symbolic links');
      const target = fs.readlinkSync(next);
      if (path.isAbsolute(target)) throw outside();
      pending.unshift(...components(target));
      continue;
    }
    current = next;
  }
  return current;
}

function components(relative: string): string[] {
  return relative.split(path.sep).filter((part) => part !== '' && part !== '.');
}

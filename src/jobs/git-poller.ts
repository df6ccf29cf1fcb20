import { randomUUID } from 'node:crypto';
import { repoUrl } from '../domain/git-auth.ts';
import { isDeleting } from '../domain/service-states.ts';
import { recordAudit } from '../domain/usecases/audit.ts';
import type { Deps } from '../domain/usecases/context.ts';
import { acceptDeployment } from '../domain/usecases/deployments.ts';
import { lockService } from '../domain/usecases/service-guards.ts';
import { advanceHead, pollTargets } from '../store/repositories/git-poll-heads.ts';
import type { ServiceRow } from '../store/schema.ts';
import { repeatEvery } from './every.ts';
import { gitAccessOf } from './git-access.ts';
import { branchHead } from './git-head.ts';

/** The head of the service's branch, with its connection or anonymously from BERTH_GIT_BASE_URL. */
async function headOf(deps: Pick<Deps, 'store' | 'secretBox' | 'config'>, service: ServiceRow) {
  const access = await gitAccessOf(deps, service);
  const url = repoUrl(access?.baseUrl ?? deps.config.gitBaseUrl, service.git_repo_full_name ?? '');
  return branchHead(url, service.git_repo_branch ?? 'main', access, 60_000);
}

/**
 * One round: every watched service's branch head; a head that moved since the last round deploys, in
 * the transaction that moves it, so two pollers (or two processes) deploy one commit once. The first
 * head seen is where watching starts: it is not deployed.
 */
export async function pollGitHeads(
  deps: Pick<Deps, 'store' | 'secretBox' | 'config' | 'logger'>,
): Promise<void> {
  // One ls-remote per repository, branch and credential, however many services share them.
  const heads = new Map<string, Promise<string | undefined>>();
  for (const service of await pollTargets(deps.store.db)) {
    const key = `${service.installation_id ?? ''} ${service.git_repo_full_name} ${service.git_repo_branch}`;
    if (!heads.has(key)) heads.set(key, headOf(deps, service));
    const head = await heads.get(key)?.catch((err: Error) => {
      deps.logger.warn(
        { service: service.id, err: err.message },
        'git poller could not read the branch head',
      );
      return undefined;
    });
    if (!head) continue;
    await deps.store.db.transaction().execute(async (trx) => {
      if ((await advanceHead(trx, service.id, head)) !== 'moved') return;
      const locked = await lockService(trx, service.id);
      if (isDeleting(locked.state)) return;
      const deployment = await acceptDeployment(
        trx,
        deps.secretBox,
        service.id,
        { commit_id: head },
        { locked },
      );
      await recordAudit(
        trx,
        { accountId: service.account_id, tokenId: null, name: 'Git poller', requestId: randomUUID() },
        'deployment.create',
        { id: deployment.id, environmentId: service.environment_id },
      );
    });
  }
}

/** Polls every auto_deploy branch at `everyMs` (BERTH_GIT_POLL_INTERVAL_MS), one round at a time. */
export function startGitPoller(
  deps: Pick<Deps, 'store' | 'secretBox' | 'config' | 'logger'>,
  everyMs = deps.config.gitPollIntervalMs,
): { stop(): Promise<void> } {
  const log = deps.logger.child({ component: 'git-poller' });
  return repeatEvery(
    everyMs,
    () => pollGitHeads(deps),
    (err) => log.warn({ err }, 'git polling failed'),
  );
}

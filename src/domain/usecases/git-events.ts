/**
 * Webhooks from git hosts: a delivery is matched to the connection whose secret signed it (none: 401,
 * nothing written), recorded by its delivery id (a redelivery does nothing), and acted on in the same
 * transaction: a push deploys the pushed commit on every auto_deploy service of that repository and
 * branch; a pull request creates, updates or deletes its preview exactly as the deploy endpoint's
 * preview mode does. Each change is audited under the host's name, with the delivery id as request id.
 * @module
 */
import type { Db } from '../../store/database.ts';
import { findAccount } from '../../store/repositories/accounts.ts';
import { recordCommitDetails } from '../../store/repositories/deployments.ts';
import {
  gitConnectionsOfKind,
  recordDelivery,
  servicesOnBranch,
} from '../../store/repositories/git-connections.ts';
import { advanceHead } from '../../store/repositories/git-poll-heads.ts';
import { findPreview } from '../../store/repositories/services.ts';
import type { GitConnectionRow, GitKind } from '../../store/schema.ts';
import { UnauthorizedError } from '../errors.ts';
import {
  type GitEvent,
  githubEvent,
  githubSignatureMatches,
  gitlabEvent,
  gitlabTokenMatches,
  type PullRequestEvent,
  type PushEvent,
} from '../git-events.ts';
import { effectiveFeatures } from '../plans.ts';
import { isDeleting } from '../service-states.ts';
import { recordAudit } from './audit.ts';
import type { Actor, Deps } from './context.ts';
import { acceptDeployment } from './deployments.ts';
import { checkPreview, deployPreviewIn } from './previews.ts';
import { lockService } from './service-guards.ts';
import { deleteServiceIn } from './services.ts';

export interface Delivery {
  kind: GitKind;
  /** X-GitHub-Delivery / X-Gitlab-Event-UUID. */
  id: string;
  /** X-GitHub-Event / X-Gitlab-Event. */
  event: string;
  /** X-Hub-Signature-256 (GitHub) or X-Gitlab-Token (GitLab). */
  proof: string;
  /** The body as sent: GitHub signs these bytes. */
  raw: Buffer;
  payload: unknown;
}

export interface DeliveryOutcome {
  delivery_id: string;
  duplicate: boolean;
  /** Why nothing was done, when nothing was. */
  ignored: string | null;
  deployment_ids: string[];
  preview_service_ids: string[];
  deleted_service_ids: string[];
}

const HOST = { github: 'GitHub', gitlab: 'GitLab' } as const;

/** The connection whose webhook secret signed the delivery, compared in constant time against each. */
function signer(deps: Pick<Deps, 'secretBox'>, connections: GitConnectionRow[], delivery: Delivery) {
  return connections.find((c) => {
    const secret = deps.secretBox.open(c.webhook_secret_sealed);
    return delivery.kind === 'github'
      ? githubSignatureMatches(secret, delivery.raw, delivery.proof)
      : gitlabTokenMatches(secret, delivery.proof);
  });
}

export async function receiveDelivery(
  deps: Pick<Deps, 'store' | 'secretBox'>,
  delivery: Delivery,
): Promise<DeliveryOutcome> {
  const connection = signer(deps, await gitConnectionsOfKind(deps.store.db, delivery.kind), delivery);
  if (!connection) throw new UnauthorizedError();
  const event: GitEvent =
    delivery.kind === 'github'
      ? githubEvent(delivery.event, delivery.payload)
      : gitlabEvent(delivery.event, delivery.payload);
  const outcome: DeliveryOutcome = {
    delivery_id: delivery.id,
    duplicate: false,
    ignored: null,
    deployment_ids: [],
    preview_service_ids: [],
    deleted_service_ids: [],
  };
  return deps.store.db.transaction().execute(async (trx) => {
    const fresh = await recordDelivery(trx, {
      connectionId: connection.id,
      deliveryId: delivery.id,
      event: delivery.event,
    });
    if (!fresh) return { ...outcome, duplicate: true };
    if (event.type === 'ignored') return { ...outcome, ignored: event.why };
    const account = await findAccount(trx, connection.account_id);
    if (!account || account.plan === 'none') return { ...outcome, ignored: 'the account has no active plan' };
    const actor: Actor = {
      accountId: account.id,
      tokenId: null,
      name: `${HOST[delivery.kind]} ${event.type === 'push' ? 'push' : 'pull request'}`,
      requestId: delivery.id,
    };
    const match = { accountId: account.id, source: delivery.kind, connectionId: connection.id };
    if (event.type === 'push') {
      outcome.deployment_ids = await deployPush(trx, deps, actor, match, event);
    } else if (!effectiveFeatures(account.plan, account.features).has('previews')) {
      outcome.ignored = "the account's plan does not include previews";
    } else {
      Object.assign(outcome, await previewPullRequest(trx, deps, actor, match, event));
    }
    return outcome;
  });
}

type Match = { accountId: string; source: GitKind; connectionId: string };

/** One deployment of the pushed commit per auto_deploy service on the branch, in creation order. */
async function deployPush(
  trx: Db,
  deps: Pick<Deps, 'secretBox'>,
  actor: Actor,
  match: Match,
  event: PushEvent,
): Promise<string[]> {
  const ids: string[] = [];
  for (const service of await servicesOnBranch(trx, { ...match, repo: event.repo, branch: event.branch })) {
    // A job never deploys on push (the spec refuses auto_deploy on jobs; a type changed later keeps it).
    if (!service.auto_deploy || service.type === 'job') continue;
    const locked = await lockService(trx, service.id);
    if (isDeleting(locked.state)) continue;
    const deployment = await acceptDeployment(
      trx,
      deps.secretBox,
      service.id,
      { commit_id: event.commit.id },
      null,
      locked,
    );
    // The poller (if on) then sees this head as known and does not deploy it again.
    await advanceHead(trx, service.id, event.commit.id);
    await recordCommitDetails(trx, deployment.id, {
      git_commit_author: event.commit.author,
      git_commit_message: event.commit.message.slice(0, 2000),
    });
    await recordAudit(trx, actor, 'deployment.create', {
      id: deployment.id,
      environmentId: service.environment_id,
    });
    ids.push(deployment.id);
  }
  return ids;
}

/** The preview of every enable_previews service on the pull request's base branch: deployed, or deleted. */
async function previewPullRequest(
  trx: Db,
  deps: Pick<Deps, 'secretBox'>,
  actor: Actor,
  match: Match,
  event: PullRequestEvent,
) {
  const touched = { preview_service_ids: [] as string[], deleted_service_ids: [] as string[] };
  const parents = await servicesOnBranch(trx, { ...match, repo: event.repo, branch: event.baseBranch });
  for (const parent of parents) {
    const body = {
      preview: true,
      commit_id: event.headSha,
      branch: event.headBranch.slice(0, 100),
      pr_number: event.number,
    };
    // The deploy endpoint's preview rules: enable_previews, github, web, not itself a preview.
    if (checkPreview(parent, body).length > 0 || isDeleting(parent.state)) continue;
    const existing = await findPreview(trx, parent.id, event.number);
    // A preview already being deleted (closed, then reopened at once) is left to finish.
    if (existing && isDeleting(existing.state)) continue;
    if (event.action === 'open') {
      const { preview } = await deployPreviewIn(trx, deps, actor, parent, body);
      touched.preview_service_ids.push(preview.id);
    } else if (existing) {
      await deleteServiceIn(trx, actor, existing);
      touched.deleted_service_ids.push(existing.id);
    }
  }
  return touched;
}

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
  gitConnectionOfKind,
  hookCandidates,
  recordDelivery,
  servicesOnBranch,
} from '../../store/repositories/git-connections.ts';
import { headOf, recordPushedHead } from '../../store/repositories/git-poll-heads.ts';
import { findPreview } from '../../store/repositories/services.ts';
import type { GitConnectionRow, GitKind } from '../../store/schema.ts';
import type { SecretBox } from '../../store/secret-box.ts';
import { UnauthorizedError, ValidationError } from '../errors.ts';
import {
  deliveryRouting,
  type GitEvent,
  githubEvent,
  gitlabEvent,
  type PullRequestEvent,
  type PushEvent,
  proofCheck,
  typeboxValue,
} from '../git-events.ts';
import { type DeployBody, DeployRequestBody } from '../inputs.ts';
import { effectiveFeatures } from '../plans.ts';
import { redactor } from '../redact.ts';
import { isDeleting } from '../service-states.ts';
import { isUuid } from '../uuid.ts';
import { recordAudit } from './audit.ts';
import type { Actor, Deps } from './context.ts';
import { acceptDeployment, checkDeployTarget } from './deployments.ts';
import { checkPreview, checkPreviewBody, deployPreviewIn } from './previews.ts';
import { maskedValuesOf } from './secrets.ts';
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
  /** The address the delivery came from (api/client-address.ts), for the audit log. */
  clientAddress: string;
  /** The connection the URL names (`/hooks/{kind}/{connection}`); absent on `/hooks/{kind}`. */
  connectionId?: string;
  /** Reads the body, handing each chunk to `onChunk` as it arrives (GitHub signs these bytes). */
  read(onChunk: (chunk: Buffer) => void): Promise<Buffer>;
  /** The body's JSON, undefined when it is none: parsed only once it is needed. */
  parse(raw: Buffer): unknown;
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

/**
 * At most this many connections are checked for a delivery to `/hooks/{kind}` (one naming a repository
 * that many accounts build from): an unsigned delivery costs at most this many HMACs, whatever the
 * number of connections. docs/git.md: such repositories use `/hooks/{kind}/{connection}`.
 */
export const MAX_HOOK_CANDIDATES = 4;

/** Opened webhook secrets by sealed value (a rotation seals anew), so a delivery decrypts nothing twice. */
const opened = new WeakMap<SecretBox, Map<string, string>>();
const MAX_OPENED = 10_000;

function openSecret(box: SecretBox, sealed: string): string {
  const cache = opened.get(box) ?? new Map<string, string>();
  opened.set(box, cache);
  let secret = cache.get(sealed);
  if (secret === undefined) {
    secret = box.open(sealed);
    // The oldest entry goes first: Maps keep insertion order.
    if (cache.size >= MAX_OPENED) cache.delete(cache.keys().next().value as string);
    cache.set(sealed, secret);
  }
  return secret;
}

/**
 * The connection that signed the delivery, found before any secret is opened: the one the URL names,
 * its proof checked as the body streams in; else the few that the payload's installation or repository
 * can belong to (by index), each checked once. None: 401, and nothing was written.
 */
async function signedBy(
  deps: Pick<Deps, 'store' | 'secretBox'>,
  delivery: Delivery,
): Promise<{ connection: GitConnectionRow; payload: unknown }> {
  const { kind, proof } = delivery;
  if (delivery.connectionId !== undefined) {
    const named = isUuid(delivery.connectionId)
      ? await gitConnectionOfKind(deps.store.db, kind, delivery.connectionId)
      : undefined;
    if (!named) throw new UnauthorizedError();
    const check = proofCheck(kind, openSecret(deps.secretBox, named.webhook_secret_sealed), proof);
    const raw = await delivery.read((chunk) => check.update(chunk));
    if (!check.matches()) throw new UnauthorizedError();
    return { connection: named, payload: delivery.parse(raw) };
  }
  const raw = await delivery.read(() => {});
  const payload = delivery.parse(raw);
  const routing = await deliveryRouting(kind, payload);
  const candidates = routing ? await hookCandidates(deps.store.db, kind, routing, MAX_HOOK_CANDIDATES) : [];
  const connection = candidates.find((c) => {
    const check = proofCheck(kind, openSecret(deps.secretBox, c.webhook_secret_sealed), proof);
    check.update(raw);
    return check.matches();
  });
  if (!connection) throw new UnauthorizedError();
  return { connection, payload };
}

export async function receiveDelivery(
  deps: Pick<Deps, 'store' | 'secretBox'>,
  delivery: Delivery,
): Promise<DeliveryOutcome> {
  const { connection, payload } = await signedBy(deps, delivery);
  const event: GitEvent =
    delivery.kind === 'github'
      ? await githubEvent(delivery.event, payload)
      : await gitlabEvent(delivery.event, payload);
  await checkDeployCall(delivery.kind, event);
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
    // The reason may quote the payload (a ref, an action): the answer keeps it short.
    if (event.type === 'ignored') return { ...outcome, ignored: event.why.slice(0, 300) };
    const account = await findAccount(trx, connection.account_id);
    if (!account || account.plan === 'none') return { ...outcome, ignored: 'the account has no active plan' };
    const actor: Actor = {
      accountId: account.id,
      tokenId: null,
      name: `${HOST[delivery.kind]} ${event.type === 'push' ? 'push' : 'pull request'}`,
      requestId: delivery.id,
      clientAddress: delivery.clientAddress,
    };
    const match = { accountId: account.id, source: delivery.kind, connectionId: connection.id };
    if (event.type === 'push') {
      const pushed = await deployPush(trx, deps, actor, match, event);
      outcome.deployment_ids = pushed.ids;
      if (pushed.ids.length === 0 && pushed.duplicates > 0) outcome.duplicate = true;
      else if (pushed.ids.length === 0 && pushed.older > 0)
        outcome.ignored =
          `commit ${event.commit.id} is older than the last push deployed on ${event.branch}`.slice(0, 300);
    } else if (!effectiveFeatures(account.plan, account.features).has('previews')) {
      outcome.ignored = "the account's plan does not include previews";
    } else {
      const touched = await previewPullRequest(trx, deps, actor, match, event);
      outcome.preview_service_ids = touched.preview_service_ids;
      outcome.deleted_service_ids = touched.deleted_service_ids;
      const nothing = touched.preview_service_ids.length === 0;
      outcome.duplicate = touched.duplicate && nothing;
      if (touched.older && nothing && !outcome.duplicate)
        outcome.ignored =
          `pull request ${event.number} at ${event.headSha} is older than the head its preview last deployed`.slice(
            0,
            300,
          );
    }
    return outcome;
  });
}

/**
 * The deploy call a delivery amounts to passes the deploy endpoint's rules (its body schema, its target
 * rule, its preview rules), or the delivery is a 422 naming the payload's fields and does nothing.
 */
async function checkDeployCall(kind: GitKind, event: GitEvent): Promise<void> {
  if (event.type === 'ignored') return;
  const { Errors } = await typeboxValue();
  const [body, paths]: [DeployBody, Record<string, string>] =
    event.type === 'push'
      ? [{ commit_id: event.commit.id }, { commit_id: kind === 'github' ? 'after' : 'checkout_sha' }]
      : [
          { preview: true, commit_id: event.headSha, branch: event.headBranch, pr_number: event.number },
          { commit_id: 'pull_request.head.sha', branch: 'pull_request.head.ref', pr_number: 'number' },
        ];
  const found = [
    ...[...Errors(DeployRequestBody, body)].map((e) => {
      const field = e.instancePath.slice(1);
      return { field, error: `${field} ${e.message}` };
    }),
    ...(event.type === 'push' ? checkDeployTarget(body, kind) : checkPreviewBody(body)),
  ];
  const errors = new Map<string, string>();
  for (const { field, error } of found) {
    const path = paths[field] ?? field;
    if (!errors.has(path)) errors.set(path, error.replace(field, path));
  }
  if (errors.size > 0) throw ValidationError.fields([...errors].map(([field, error]) => ({ field, error })));
}

/**
 * Whether a signed event is a replay for a service (its delivery id is not signed, so a captured event
 * can come again under a new one): its commit is the service's recorded head already (`duplicate`), or
 * it is older than the newest event deployed and does not follow the head (`older`: a force-push back to
 * an older commit follows the head, and is deployed).
 */
function replayOf(
  last: { head: string; pushed_at: Date | null } | undefined,
  event: { commit: string; before: string; at: Date | null },
): 'duplicate' | 'older' | null {
  if (!last) return null;
  if (last.head === event.commit) return 'duplicate';
  const older = event.before !== last.head && event.at && last.pushed_at && event.at < last.pushed_at;
  return older ? 'older' : null;
}

type Match = { accountId: string; source: GitKind; connectionId: string };

/**
 * One deployment of the pushed commit per auto_deploy service on the branch, in creation order. A
 * delivery id is not signed, so a captured push can be sent again under a new one: a commit that is
 * already the service's head is a duplicate, and a push older than the newest one deployed (by its
 * commit time, unless it follows the head: a force-push back to an older commit) is not deployed.
 */
async function deployPush(
  trx: Db,
  deps: Pick<Deps, 'secretBox'>,
  actor: Actor,
  match: Match,
  event: PushEvent,
) {
  const pushed = { ids: [] as string[], duplicates: 0, older: 0 };
  for (const service of await servicesOnBranch(trx, { ...match, repo: event.repo, branch: event.branch })) {
    // A job never deploys on push (the spec refuses auto_deploy on jobs; a type changed later keeps it).
    if (!service.auto_deploy || service.type === 'job') continue;
    const locked = await lockService(trx, service.id);
    if (isDeleting(locked.state)) continue;
    const at = event.commit.timestamp;
    const replay = replayOf(await headOf(trx, service.id), {
      commit: event.commit.id,
      before: event.before,
      at,
    });
    if (replay === 'duplicate') pushed.duplicates++;
    if (replay === 'older') pushed.older++;
    if (replay) continue;
    const deployment = await acceptDeployment(
      trx,
      deps.secretBox,
      service.id,
      { commit_id: event.commit.id },
      { locked },
    );
    // The poller (if on) then sees this head as known and does not deploy it again.
    await recordPushedHead(trx, service.id, event.commit.id, at);
    // Stored masked, as the note is: the events copy them, and the log masks them alike.
    const mask = redactor(await maskedValuesOf(trx, deps.secretBox, deployment));
    await recordCommitDetails(trx, deployment.id, {
      git_commit_author: mask(event.commit.author),
      git_commit_message: mask(event.commit.message).slice(0, 2000),
    });
    await recordAudit(trx, actor, 'deployment.create', {
      id: deployment.id,
      environmentId: service.environment_id,
    });
    pushed.ids.push(deployment.id);
  }
  return pushed;
}

/** The preview of every enable_previews service on the pull request's base branch: deployed, or deleted. */
async function previewPullRequest(
  trx: Db,
  deps: Pick<Deps, 'secretBox'>,
  actor: Actor,
  match: Match,
  event: PullRequestEvent,
) {
  const touched = {
    preview_service_ids: [] as string[],
    deleted_service_ids: [] as string[],
    duplicate: false,
    older: false,
  };
  const parents = await servicesOnBranch(trx, { ...match, repo: event.repo, branch: event.baseBranch });
  for (const parent of parents) {
    const body = {
      preview: true,
      commit_id: event.headSha,
      branch: event.headBranch,
      pr_number: event.number,
    };
    // The deploy endpoint's preview rules: enable_previews, github, web, not itself a preview.
    if (checkPreview(parent, body).length > 0 || isDeleting(parent.state)) continue;
    // The parent's lock orders two deliveries of one pull request: the second sees what the first did.
    await lockService(trx, parent.id);
    const existing = await findPreview(trx, parent.id, event.number);
    // A preview already being deleted (closed, then reopened at once) is left to finish.
    if (existing && isDeleting(existing.state)) continue;
    if (event.action === 'open' && existing) {
      const replay = replayOf(await headOf(trx, existing.id), {
        commit: event.headSha,
        before: event.before,
        at: event.updatedAt,
      });
      if (replay === 'duplicate') touched.duplicate = true;
      if (replay === 'older') touched.older = true;
      if (replay) continue;
    }
    if (event.action === 'open') {
      const { preview } = await deployPreviewIn(trx, deps, actor, parent, body);
      await recordPushedHead(trx, preview.id, event.headSha, event.updatedAt);
      touched.preview_service_ids.push(preview.id);
    } else if (existing) {
      await deleteServiceIn(trx, actor, existing);
      touched.deleted_service_ids.push(existing.id);
    }
  }
  return touched;
}

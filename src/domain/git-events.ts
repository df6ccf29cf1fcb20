/**
 * What Berth reads of a git host's webhook payloads: only the fields it acts on, declared as schemas
 * (the rest of a payload is left alone), turned into one of three events.
 * @module
 */
import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import { Type } from 'typebox';

export interface PushEvent {
  type: 'push';
  repo: string;
  branch: string;
  /** The head before the push (all zeros for a new branch): a push that follows another names its head here. */
  before: string;
  commit: { id: string; author: string; message: string; timestamp: Date | null };
}

export interface PullRequestEvent {
  type: 'pull_request';
  /** `open`: opened, synchronized (new commits) or reopened; `close`: closed or merged. */
  action: 'open' | 'close';
  repo: string;
  /** The branch the pull request goes into: the parent service's branch. */
  baseBranch: string;
  headBranch: string;
  headSha: string;
  number: number;
  /** A synchronize's previous head (else ''): an event that follows the preview's head names it here. */
  before: string;
  /** When the pull request last changed (`pull_request.updated_at`): orders its events. */
  updatedAt: Date | null;
}

export type GitEvent = PushEvent | PullRequestEvent | { type: 'ignored'; why: string };

const Author = Type.Object({ name: Type.String(), email: Type.String() });
const Commit = Type.Object({
  id: Type.String(),
  message: Type.String(),
  author: Author,
  timestamp: Type.Optional(Type.String()),
});

const GithubPush = Type.Object({
  ref: Type.String(),
  before: Type.Optional(Type.String()),
  after: Type.String(),
  deleted: Type.Optional(Type.Boolean()),
  head_commit: Type.Union([Commit, Type.Null()]),
  repository: Type.Object({ full_name: Type.String() }),
});

const GithubPullRequest = Type.Object({
  action: Type.String(),
  number: Type.Integer({ minimum: 1 }),
  before: Type.Optional(Type.String()),
  pull_request: Type.Object({
    updated_at: Type.Optional(Type.String()),
    head: Type.Object({ ref: Type.String(), sha: Type.String() }),
    base: Type.Object({ ref: Type.String(), repo: Type.Object({ full_name: Type.String() }) }),
  }),
});

const GitlabPush = Type.Object({
  object_kind: Type.Literal('push'),
  ref: Type.String(),
  before: Type.Optional(Type.String()),
  checkout_sha: Type.Union([Type.String(), Type.Null()]),
  project: Type.Object({ path_with_namespace: Type.String() }),
  commits: Type.Array(Commit),
});

const Installation = Type.Object({ installation: Type.Object({ id: Type.Integer() }) });
const AppHook = Type.Object({ hook: Type.Object({ type: Type.Literal('App'), app_id: Type.Integer() }) });
const GithubRepository = Type.Object({
  repository: Type.Object({ full_name: Type.String({ maxLength: 300 }) }),
});
const GitlabProject = Type.Object({
  project: Type.Object({ path_with_namespace: Type.String({ maxLength: 300 }) }),
});

/**
 * TypeBox's value checker (some 300 modules) loads with the first delivery, not with every server's
 * start, which reads no payload (docs/performance.md, "The embedded start: its collection and its
 * modules").
 */
export const typeboxValue = () => import('typebox/value');

const BRANCH_REF = /^refs\/heads\/(.+)$/;
const author = (a: { name: string; email: string }) => `${a.name} <${a.email}>`;

/** A time as the host gave it (ISO 8601), or null when it gave none that reads as a time. */
function timeOf(text: string | undefined): Date | null {
  const at = text ? new Date(text) : null;
  return at && !Number.isNaN(at.getTime()) ? at : null;
}

/** A GitHub event (`X-GitHub-Event`) as Berth acts on it. */
export async function githubEvent(name: string, payload: unknown): Promise<GitEvent> {
  const { Check } = await typeboxValue();
  if (name === 'push') {
    if (!Check(GithubPush, payload)) return { type: 'ignored', why: 'a push payload without its fields' };
    const branch = BRANCH_REF.exec(payload.ref)?.[1];
    if (!branch) return { type: 'ignored', why: `a push to ${payload.ref}, not a branch` };
    if (payload.deleted || !payload.head_commit) return { type: 'ignored', why: `branch ${branch} deleted` };
    const head = payload.head_commit;
    return {
      type: 'push',
      repo: payload.repository.full_name,
      branch,
      before: payload.before ?? '',
      commit: {
        id: payload.after,
        author: author(head.author),
        message: head.message.trim(),
        timestamp: timeOf(head.timestamp),
      },
    };
  }
  if (name === 'pull_request') {
    if (!Check(GithubPullRequest, payload))
      return { type: 'ignored', why: 'a pull_request payload without its fields' };
    const action = ['opened', 'synchronize', 'reopened'].includes(payload.action)
      ? 'open'
      : payload.action === 'closed'
        ? 'close'
        : undefined;
    if (!action) return { type: 'ignored', why: `pull request action ${payload.action}` };
    const pr = payload.pull_request;
    return {
      type: 'pull_request',
      action,
      repo: pr.base.repo.full_name,
      baseBranch: pr.base.ref,
      headBranch: pr.head.ref,
      headSha: pr.head.sha,
      number: payload.number,
      before: payload.before ?? '',
      updatedAt: timeOf(pr.updated_at),
    };
  }
  return { type: 'ignored', why: `event ${name}` };
}

/** A GitLab event (`X-Gitlab-Event`). Merge requests do nothing: previews are for GitHub services. */
export async function gitlabEvent(name: string, payload: unknown): Promise<GitEvent> {
  if (name !== 'Push Hook') return { type: 'ignored', why: `event ${name}` };
  const { Check } = await typeboxValue();
  if (!Check(GitlabPush, payload)) return { type: 'ignored', why: 'a push payload without its fields' };
  const branch = BRANCH_REF.exec(payload.ref)?.[1];
  if (!branch || !payload.checkout_sha)
    return { type: 'ignored', why: `a push to ${payload.ref} with no head` };
  const head = payload.commits.find((c) => c.id === payload.checkout_sha);
  return {
    type: 'push',
    repo: payload.project.path_with_namespace,
    branch,
    before: payload.before ?? '',
    commit: {
      id: payload.checkout_sha,
      author: head ? author(head.author) : '',
      message: head?.message.trim() ?? '',
      timestamp: timeOf(head?.timestamp),
    },
  };
}

/** A delivery's proof checked against one connection's secret, fed the body as it arrives. */
export interface ProofCheck {
  update(chunk: Buffer): void;
  matches(): boolean;
}

/**
 * GitHub's `X-Hub-Signature-256` is `sha256=` and the HMAC-SHA256 of the body: computed over the chunks
 * as they arrive, compared in constant time at the end. GitLab's `X-Gitlab-Token` is the secret itself;
 * both sides are hashed first, so the comparison takes the same time whatever the length sent.
 */
export function proofCheck(kind: 'github' | 'gitlab', secret: string, proof: string): ProofCheck {
  if (kind === 'gitlab') {
    const digest = (text: string) => createHash('sha256').update(text).digest();
    return { update: () => {}, matches: () => timingSafeEqual(digest(secret), digest(proof)) };
  }
  const hmac = createHmac('sha256', secret);
  return {
    update: (chunk) => hmac.update(chunk),
    matches: () => {
      const expected = Buffer.from(`sha256=${hmac.digest('hex')}`);
      const given = Buffer.from(proof);
      return given.length === expected.length && timingSafeEqual(given, expected);
    },
  };
}

export type HookRouting = { installationId: string } | { appId: string } | { repo: string };

/** What a delivery to `/hooks/{kind}` names that finds its connection: the App installation (or App), or the repository. */
export async function deliveryRouting(
  kind: 'github' | 'gitlab',
  payload: unknown,
): Promise<HookRouting | null> {
  const { Check } = await typeboxValue();
  if (kind === 'github' && Check(Installation, payload))
    return { installationId: String(payload.installation.id) };
  // An App's ping names no installation, only the App.
  if (kind === 'github' && Check(AppHook, payload)) return { appId: String(payload.hook.app_id) };
  if (kind === 'github' && Check(GithubRepository, payload)) return { repo: payload.repository.full_name };
  if (kind === 'gitlab' && Check(GitlabProject, payload))
    return { repo: payload.project.path_with_namespace };
  return null;
}

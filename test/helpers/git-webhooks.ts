import { createHmac, randomUUID } from 'node:crypto';
import type { Harness, Reply } from './harness.ts';

/** Webhook deliveries as GitHub and GitLab send them: the fields Berth reads, signed with a secret. */
export function githubPush(
  repo: string,
  branch: string,
  sha: string,
  message = 'a change',
  push: { before?: string; timestamp?: string } = {},
) {
  return {
    ref: `refs/heads/${branch}`,
    before: push.before ?? '0'.repeat(40),
    after: sha,
    deleted: false,
    head_commit: {
      id: sha,
      message,
      author: { name: 'Dev Eloper', email: 'dev@acme.test' },
      ...(push.timestamp ? { timestamp: push.timestamp } : {}),
    },
    repository: { full_name: repo },
  };
}

export function githubPullRequest(
  action: string,
  pr: {
    repo: string;
    base: string;
    head: string;
    sha: string;
    number: number;
    before?: string;
    updatedAt?: string;
  },
) {
  return {
    action,
    number: pr.number,
    ...(pr.before ? { before: pr.before } : {}),
    pull_request: {
      ...(pr.updatedAt ? { updated_at: pr.updatedAt } : {}),
      merged: action === 'closed',
      head: { ref: pr.head, sha: pr.sha },
      base: { ref: pr.base, repo: { full_name: pr.repo } },
    },
    repository: { full_name: pr.repo },
  };
}

export function gitlabPush(repo: string, branch: string, sha: string, message = 'a change') {
  return {
    object_kind: 'push',
    ref: `refs/heads/${branch}`,
    before: '0'.repeat(40),
    checkout_sha: sha,
    project: { path_with_namespace: repo },
    commits: [{ id: sha, message, author: { name: 'Lab Dev', email: 'lab@acme.test' } }],
  };
}

/**
 * POSTs a GitHub delivery signed with `secret` (X-Hub-Signature-256 over the exact bytes sent), to
 * `/hooks/github/{connection}` when a connection is given, else to `/hooks/github`.
 */
export function sendGithub(
  h: Harness,
  secret: string,
  event: string,
  payload: unknown,
  delivery: string = randomUUID(),
  connection?: string,
): Promise<Reply> {
  // A string is sent as it is: bodies no encoder would make.
  const raw = typeof payload === 'string' ? payload : JSON.stringify(payload);
  return h.request('POST', connection ? `/hooks/github/${connection}` : '/hooks/github', {
    rawBody: raw,
    headers: {
      'content-type': 'application/json',
      'x-github-event': event,
      'x-github-delivery': delivery,
      'x-hub-signature-256': `sha256=${createHmac('sha256', secret).update(raw).digest('hex')}`,
    },
  });
}

export function sendGitlab(
  h: Harness,
  token: string,
  payload: unknown,
  delivery: string = randomUUID(),
  connection?: string,
): Promise<Reply> {
  return h.request('POST', connection ? `/hooks/gitlab/${connection}` : '/hooks/gitlab', {
    rawBody: JSON.stringify(payload),
    headers: {
      'content-type': 'application/json',
      'x-gitlab-event': 'Push Hook',
      'x-gitlab-event-uuid': delivery,
      'x-gitlab-token': token,
    },
  });
}

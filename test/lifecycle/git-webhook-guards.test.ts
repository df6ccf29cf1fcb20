import assert from 'node:assert/strict';
import { createHmac, randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import {
  githubPullRequest,
  githubPush,
  gitlabPush,
  sendGithub,
  sendGitlab,
} from '../helpers/git-webhooks.ts';
import { type Harness, startHarness, type Tenant, VALID_SERVICE } from '../helpers/harness.ts';

/**
 * What a webhook delivery may not do (issue 24): reach a connection other than the one it is routed
 * to, carry a target the deploy call would refuse, replay an older push, or fail with a 5xx; and what it
 * may: be as large as GitHub sends.
 */
const SECRET = 'webhook-secret-of-guards';
let h: Harness;
let t: Tenant;
let github: string;
let gitlab: string;

before(async () => {
  h = await startHarness({ rateLimitPerMin: 100_000, authFailuresPerMin: 100_000 });
  t = await h.tenant();
  github = await h.gitConnection(t, 'github', { webhook_secret: SECRET });
  gitlab = await h.gitConnection(t, 'gitlab', { webhook_secret: SECRET });
});
after(() => h.close());

async function create(body: Record<string, unknown>): Promise<string> {
  const res = await h.request('POST', `/v1/environments/${t.envId}/services`, { token: t.token, body });
  assert.equal(res.status, 200, res.raw);
  return res.body.data.service.id;
}

const deploymentsOf = (serviceId: string) =>
  h.deps.store.db
    .selectFrom('deployments')
    .select('git_commit_ref')
    .where('service_id', '=', serviceId)
    .orderBy('created_at')
    .execute()
    .then((rows) => rows.map((r) => r.git_commit_ref));

const deliveries = () =>
  h.deps.store.db
    .selectFrom('git_deliveries')
    .select((eb) => eb.fn.countAll<string>().as('n'))
    .executeTakeFirstOrThrow()
    .then((r) => Number(r.n));

describe('a connection of its own URL', () => {
  test('/hooks/{kind}/{connection} checks that connection alone; another, unknown or of the other kind is a 401, a malformed id 404', async () => {
    const repo = 'acme/routed';
    const web = await create({ ...VALID_SERVICE.github, git_repo_full_name: repo, auto_deploy: true });
    const sha = '1'.repeat(40);
    const ok = await sendGithub(h, SECRET, 'push', githubPush(repo, 'main', sha), randomUUID(), github);
    assert.equal(ok.status, 200, ok.raw);
    assert.deepEqual(await deploymentsOf(web), [sha]);

    const elsewhere = await h.gitConnection(await h.tenant(), 'github', {
      webhook_secret: 'another-secret-16',
    });
    for (const connection of [elsewhere, gitlab, randomUUID()]) {
      const res = await sendGithub(
        h,
        SECRET,
        'push',
        githubPush(repo, 'main', '2'.repeat(40)),
        randomUUID(),
        connection,
      );
      assert.equal(res.status, 401, `${connection}: ${res.raw}`);
    }
    // A path id that is not a UUID is 404, as on every route (docs/api.md).
    const malformed = await sendGithub(
      h,
      SECRET,
      'push',
      githubPush(repo, 'main', '2'.repeat(40)),
      randomUUID(),
      'not-a-uuid',
    );
    assert.equal(malformed.status, 404, malformed.raw);
    const lab = await create({
      ...VALID_SERVICE.gitlab,
      git_repo_full_name: 'acme/routed-lab',
      auto_deploy: true,
    });
    assert.equal(
      (
        await sendGitlab(
          h,
          SECRET,
          gitlabPush('acme/routed-lab', 'main', '3'.repeat(40)),
          randomUUID(),
          github,
        )
      ).status,
      401,
    );
    const labOk = await sendGitlab(
      h,
      SECRET,
      gitlabPush('acme/routed-lab', 'main', '3'.repeat(40)),
      randomUUID(),
      gitlab,
    );
    assert.equal(labOk.status, 200, labOk.raw);
    assert.deepEqual(await deploymentsOf(lab), ['3'.repeat(40)]);
    assert.deepEqual(await deploymentsOf(web), [sha]);
  });

  test('/hooks/github finds an App connection by the installation (or, for a ping, the App) in the payload', async () => {
    const { generateKeyPairSync } = await import('node:crypto');
    const key = generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({
      type: 'pkcs1',
      format: 'pem',
    });
    const secret = 'app-webhook-secret-16';
    await h.gitConnection(await h.tenant(), 'github', {
      token: undefined,
      github_app_id: '4242',
      github_installation_id: '777',
      private_key: key,
      webhook_secret: secret,
    });
    const ping = await sendGithub(h, secret, 'ping', {
      zen: 'Design for failure.',
      hook: { type: 'App', app_id: 4242 },
    });
    assert.equal(ping.status, 200, ping.raw);
    const installed = await sendGithub(h, secret, 'installation_repositories', {
      action: 'added',
      installation: { id: 777 },
    });
    assert.equal(installed.status, 200, installed.raw);
    const wrong = await sendGithub(h, secret, 'ping', { installation: { id: 778 } });
    assert.equal(wrong.status, 401, wrong.raw);
  });
});

describe('targets checked with the deploy call’s rules', () => {
  const repo = 'acme/checked';
  let web: string;
  before(async () => {
    web = await create({
      ...VALID_SERVICE.github,
      git_repo_full_name: repo,
      auto_deploy: true,
      enable_previews: true,
      type: 'web',
    });
  });

  test('a push whose commit the deploy call would refuse is a 422 naming the payload field; nothing is written', async () => {
    const before = await deliveries();
    for (const [sha, error] of [
      ['not a sha at all', 'after must be a non-empty value without spaces'],
      ['a'.repeat(5000), 'after must not have more than 100 characters'],
    ] as const) {
      const res = await sendGithub(h, SECRET, 'push', githubPush(repo, 'main', sha));
      assert.equal(res.status, 422, res.raw);
      assert.deepEqual(res.body.errors, [{ field: 'after', error }]);
    }
    assert.equal(await deliveries(), before);
    assert.deepEqual(await deploymentsOf(web), []);
  });

  test('a pull request with a ref git could read as an option, or a number beyond the deploy call’s, is a 422', async () => {
    const before = await deliveries();
    const pr = { repo, base: 'main', head: 'feature/x', sha: 'b'.repeat(40), number: 3 };
    const cases = [
      [{ ...pr, head: '--upload-pack=x' }, 'pull_request.head.ref'],
      [{ ...pr, head: 'a b' }, 'pull_request.head.ref'],
      [{ ...pr, number: 2_147_483_649 }, 'number'],
      [{ ...pr, sha: 'not a sha' }, 'pull_request.head.sha'],
    ] as const;
    for (const [fields, field] of cases) {
      const res = await sendGithub(
        h,
        SECRET,
        'pull_request',
        githubPullRequest('opened', fields),
        randomUUID(),
        github,
      );
      assert.equal(res.status, 422, res.raw);
      assert.deepEqual(
        res.body.errors.map((e: { field: string }) => e.field),
        [field],
      );
      assert.match(res.body.errors[0].error, new RegExp(`^${field.replace(/\./g, '\\.')} `));
    }
    assert.equal(await deliveries(), before);
    const previews = await h.deps.store.db
      .selectFrom('services')
      .select('id')
      .where('parent_service_id', '=', web)
      .execute();
    assert.deepEqual(previews, []);
  });

  test('the deploy call refuses the same branch in preview mode', async () => {
    const res = await h.request('POST', `/v1/environments/${t.envId}/services/${web}/deploy`, {
      token: t.token,
      body: { preview: true, commit_id: 'c'.repeat(40), branch: '--upload-pack=x', pr_number: 4 },
    });
    assert.equal(res.status, 422, res.raw);
    assert.deepEqual(
      res.body.errors.map((e: { field: string }) => e.field),
      ['branch'],
    );
  });

  test('an event name longer than any host sends is a 422 before anything is written', async () => {
    const before = await deliveries();
    for (const event of ['x'.repeat(300), 'push\u0001']) {
      const res = await sendGithub(
        h,
        SECRET,
        event,
        githubPush(repo, 'main', 'd'.repeat(40)),
        randomUUID(),
        github,
      );
      assert.equal(res.status, 422, res.raw);
      assert.equal(res.body.errors[0].field, 'x-github-event');
    }
    assert.equal(await deliveries(), before);
  });

  test('a ref quoted in the answer is cut to fit it', async () => {
    const tag = { ...githubPush(repo, 'main', 'e'.repeat(40)), ref: `refs/tags/${'v'.repeat(5000)}` };
    const res = await sendGithub(h, SECRET, 'push', tag);
    assert.equal(res.status, 200, res.raw);
    assert.ok(res.body.data.ignored.length <= 300);
  });
});

describe('bodies as large as GitHub sends', () => {
  test('a 5 MiB push is read and verified; over 25 MiB is a 422 before it is read', async () => {
    const repo = 'acme/large';
    const web = await create({ ...VALID_SERVICE.github, git_repo_full_name: repo, auto_deploy: true });
    const sha = 'f'.repeat(40);
    const large = {
      ...githubPush(repo, 'main', sha),
      commits: [{ id: sha, message: 'x'.repeat(5 * 1024 * 1024) }],
    };
    const res = await sendGithub(h, SECRET, 'push', large, randomUUID(), github);
    assert.equal(res.status, 200, res.raw);
    assert.deepEqual(await deploymentsOf(web), [sha]);
    const viaRepository = await sendGithub(h, SECRET, 'push', {
      ...large,
      after: 'e'.repeat(40),
      head_commit: { ...large.head_commit, id: 'e'.repeat(40) },
    });
    assert.equal(viaRepository.status, 200, viaRepository.raw);

    const huge = 'x'.repeat(25 * 1024 * 1024 + 1);
    const refused = await h.request('POST', `/hooks/github/${github}`, {
      rawBody: huge,
      headers: {
        'content-type': 'application/json',
        'x-github-event': 'push',
        'x-github-delivery': randomUUID(),
        'x-hub-signature-256': `sha256=${createHmac('sha256', SECRET).update(huge).digest('hex')}`,
      },
    });
    assert.equal(refused.status, 422, refused.raw);
    assert.match(refused.body.errors[0].error, /25 MiB/);
  });
});

describe('replayed pushes', () => {
  test('a push repeated under a new delivery id is a duplicate; an older push after a newer one is not deployed', async () => {
    const repo = 'acme/replayed';
    const web = await create({ ...VALID_SERVICE.github, git_repo_full_name: repo, auto_deploy: true });
    const [a, b, c] = ['a1', 'b2', 'c3'].map((p) => p.repeat(20));
    const pushA = githubPush(repo, 'main', a as string, 'A', { timestamp: '2026-01-01T10:00:00+01:00' });
    const pushB = githubPush(repo, 'main', b as string, 'B', {
      before: a,
      timestamp: '2026-01-01T10:05:00+01:00',
    });
    const send = (payload: unknown) => sendGithub(h, SECRET, 'push', payload);

    assert.deepEqual((await send(pushA)).body.data.deployment_ids.length, 1);
    assert.deepEqual((await send(pushB)).body.data.deployment_ids.length, 1);
    const replayedB = await send(pushB);
    assert.equal(replayedB.status, 200, replayedB.raw);
    assert.equal(replayedB.body.data.duplicate, true);
    const replayedA = await send(pushA);
    assert.equal(replayedA.status, 200, replayedA.raw);
    assert.deepEqual(replayedA.body.data.deployment_ids, []);
    assert.match(replayedA.body.data.ignored, /older than the last push deployed on main/);
    assert.deepEqual(await deploymentsOf(web), [a, b]);

    // A force-push back to the older commit follows the head: it is deployed.
    const back = githubPush(repo, 'main', a as string, 'A', {
      before: b,
      timestamp: '2026-01-01T10:00:00+01:00',
    });
    assert.equal((await send(back)).body.data.deployment_ids.length, 1);
    // And a newer commit after it, by time, too.
    const pushC = githubPush(repo, 'main', c as string, 'C', {
      before: b,
      timestamp: '2026-01-01T10:09:00+01:00',
    });
    assert.equal((await send(pushC)).body.data.deployment_ids.length, 1);
    assert.deepEqual(await deploymentsOf(web), [a, b, a, c]);
  });

  test('a pull request event repeated, or older than the one its preview deployed, does not deploy it again', async () => {
    const repo = 'acme/replayed-pr';
    await create({ ...VALID_SERVICE.github, git_repo_full_name: repo, enable_previews: true, type: 'web' });
    const pr = { repo, base: 'main', head: 'feature', number: 9 };
    const [a, b, c] = ['5', '6', '7'].map((d) => d.repeat(40)) as [string, string, string];
    const opened = githubPullRequest('opened', { ...pr, sha: a, updatedAt: '2026-02-01T10:00:00Z' });
    const synced = githubPullRequest('synchronize', {
      ...pr,
      sha: b,
      before: a,
      updatedAt: '2026-02-01T10:05:00Z',
    });
    const send = (payload: unknown) => sendGithub(h, SECRET, 'pull_request', payload);

    const first = await send(opened);
    assert.equal(first.status, 200, first.raw);
    const [preview] = first.body.data.preview_service_ids;
    const again = await send(opened);
    assert.equal(again.status, 200, again.raw);
    assert.equal(again.body.data.duplicate, true);
    assert.deepEqual(again.body.data.preview_service_ids, []);
    assert.deepEqual((await send(synced)).body.data.preview_service_ids, [preview]);
    const replayed = await send(opened);
    assert.deepEqual(replayed.body.data.preview_service_ids, []);
    assert.match(replayed.body.data.ignored, /older than the head its preview last deployed/);
    assert.equal((await send(synced)).body.data.duplicate, true);
    // A force-push back follows the head: deployed.
    const back = githubPullRequest('synchronize', {
      ...pr,
      sha: a,
      before: b,
      updatedAt: '2026-02-01T10:01:00Z',
    });
    assert.deepEqual((await send(back)).body.data.preview_service_ids, [preview]);
    const next = githubPullRequest('synchronize', {
      ...pr,
      sha: c,
      before: a,
      updatedAt: '2026-02-01T10:09:00Z',
    });
    assert.deepEqual((await send(next)).body.data.preview_service_ids, [preview]);
    assert.deepEqual(await deploymentsOf(preview), [a, b, a, c]);
  });

  test('GitLab: the same pushed commit again is a duplicate', async () => {
    const repo = 'acme/replayed-lab';
    const lab = await create({ ...VALID_SERVICE.gitlab, git_repo_full_name: repo, auto_deploy: true });
    const push = gitlabPush(repo, 'main', '9'.repeat(40));
    assert.equal((await sendGitlab(h, SECRET, push)).body.data.deployment_ids.length, 1);
    const again = await sendGitlab(h, SECRET, push);
    assert.equal(again.body.data.duplicate, true);
    assert.deepEqual(await deploymentsOf(lab), ['9'.repeat(40)]);
  });
});

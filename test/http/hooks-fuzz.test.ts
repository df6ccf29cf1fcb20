import assert from 'node:assert/strict';
import { createHmac, randomUUID } from 'node:crypto';
import { after, test } from 'node:test';
import fc from 'fast-check';
import { githubPullRequest, githubPush, gitlabPush } from '../helpers/git-webhooks.ts';
import { type Reply, startHarness, VALID_SERVICE } from '../helpers/harness.ts';

/**
 * Property-based fuzzing of `/hooks/*` with deliveries that are signed (issue 24): whatever the headers
 * (event names and delivery ids of any length and character) and whatever the numbers and strings in
 * the payload (pull request numbers past 32 bits, floats, refs, shas), the answer is 200, 401 or 422 in
 * the spec's error shape, never a 5xx. Seeded, so a failure replays; BERTH_FUZZ_SEED explores others.
 */
const SEED = Number(process.env.BERTH_FUZZ_SEED ?? 24);
const SECRET = 'fuzzed-webhook-secret';
const REPO = 'acme/fuzz';

const h = await startHarness({ rateLimitPerMin: 10_000_000, authFailuresPerMin: 10_000_000 });
after(() => h.close());
const t = await h.tenant();
const connections = {
  github: await h.gitConnection(t, 'github', { webhook_secret: SECRET }),
  gitlab: await h.gitConnection(t, 'gitlab', { webhook_secret: SECRET }),
};
for (const source of ['github', 'gitlab'] as const) {
  const res = await h.request('POST', `/v1/environments/${t.envId}/services`, {
    token: t.token,
    body: {
      ...VALID_SERVICE[source],
      git_repo_full_name: REPO,
      git_repo_branch: 'main',
      auto_deploy: true,
      ...(source === 'github' ? { type: 'web', port: 8080, enable_previews: true } : {}),
    },
  });
  assert.equal(res.status, 200, res.raw);
}

// --- what may be sent -------------------------------------------------------------------------------

/** A header value a client can send: any visible or high byte (no control character: no line break). */
const headerText = fc
  .string({ unit: 'binary', maxLength: 400 })
  .map((s) => s.replace(/[^\u0020-\u007e\u0080-\u00ff]/g, 'x'));
const eventName = fc.oneof(
  fc.constantFrom('push', 'pull_request', 'ping', 'Push Hook', 'Merge Request Hook', 'x'.repeat(295)),
  headerText,
);
const deliveryId = fc.oneof(fc.uuid(), headerText);

/** A number as JSON text: in range, at the edges of 32 and 53 bits, beyond them, fractional, negative. */
const numberText = fc.oneof(
  fc.integer().map(String),
  fc.double({ noNaN: true, noDefaultInfinity: true }).map(String),
  fc.bigInt({ min: -(10n ** 30n), max: 10n ** 30n }).map(String),
  fc.constantFrom(
    '0',
    '-1',
    '1',
    '2147483647',
    '2147483648',
    '2147483649',
    '9007199254740993',
    '1e308',
    '1.5',
  ),
);
const text = fc.oneof(
  fc.string({ unit: 'binary', maxLength: 60 }),
  fc.constantFrom('', ' ', '-', '--upload-pack=x', 'not a sha at all', 'a'.repeat(5000), 'main', 'x..y'),
);
const sha = fc.oneof(fc.stringMatching(/^[0-9a-f]{40}$/), text);
const ref = fc.oneof(
  fc.constantFrom('refs/heads/main', 'refs/tags/v1', 'refs/heads/'),
  text.map((s) => `refs/heads/${s}`),
  text,
);
const action = fc.constantFrom('opened', 'synchronize', 'reopened', 'closed', 'edited', '');

const NUMBER = '"__number__"';
const payload = fc.oneof(
  fc
    .record({ ref, sha, message: text })
    .map(({ ref, sha, message }) => JSON.stringify({ ...githubPush(REPO, 'main', sha, message), ref })),
  fc
    .record({ action, head: text, sha, n: numberText })
    .map(({ action, head, sha, n }) =>
      JSON.stringify(githubPullRequest(action, { repo: REPO, base: 'main', head, sha, number: 0 })).replace(
        '"number":0',
        `"number":${n}`,
      ),
    ),
  fc.record({ ref, sha }).map(({ ref, sha }) => JSON.stringify({ ...gitlabPush(REPO, 'main', sha), ref })),
  fc
    .record({ n: numberText })
    .map(({ n }) =>
      JSON.stringify({ installation: { id: NUMBER }, hook: { type: 'App', app_id: NUMBER } }).replaceAll(
        NUMBER,
        n,
      ),
    ),
  text,
);

const delivery = fc.record({
  kind: fc.constantFrom('github', 'gitlab') as fc.Arbitrary<'github' | 'gitlab'>,
  ownUrl: fc.boolean(),
  signed: fc.boolean(),
  event: eventName,
  id: deliveryId,
  body: payload,
});

// --- the property -----------------------------------------------------------------------------------

function problemOf(res: Reply): string | null {
  if (![200, 401, 422].includes(res.status)) return `status ${res.status}`;
  if (!res.headers['x-request-id']) return 'no x-request-id';
  if (res.status === 200) return typeof res.body?.data?.duplicate === 'boolean' ? null : 'no outcome';
  const { error_code, message, errors, ...rest } = res.body ?? {};
  if (Object.keys(rest).length > 0) return `extra keys ${Object.keys(rest).join(', ')}`;
  if (typeof error_code !== 'string' || typeof message !== 'string') return 'not the error shape';
  if (errors !== null && !Array.isArray(errors)) return 'errors neither null nor an array';
  return null;
}

test('signed and unsigned deliveries with fuzzed headers and payload numbers: 200, 401 or 422, never a 5xx', async () => {
  const statuses = new Set<number>();
  await fc.assert(
    fc.asyncProperty(delivery, async (sent) => {
      const { kind } = sent;
      const proof =
        kind === 'github'
          ? `sha256=${createHmac('sha256', sent.signed ? SECRET : 'wrong')
              .update(sent.body)
              .digest('hex')}`
          : sent.signed
            ? SECRET
            : 'wrong';
      const res = await h.request(
        'POST',
        sent.ownUrl ? `/hooks/${kind}/${connections[kind]}` : `/hooks/${kind}`,
        {
          rawBody: sent.body,
          headers: {
            'content-type': 'application/json',
            [kind === 'github' ? 'x-github-event' : 'x-gitlab-event']: sent.event,
            [kind === 'github' ? 'x-github-delivery' : 'x-gitlab-event-uuid']: sent.id,
            [kind === 'github' ? 'x-hub-signature-256' : 'x-gitlab-token']: proof,
          },
        },
      );
      statuses.add(res.status);
      const problem = problemOf(res);
      assert.equal(
        problem,
        null,
        `${kind} ${sent.event.slice(0, 50)} ${sent.body.slice(0, 200)} -> ${res.status} ${res.raw.slice(0, 300)}`,
      );
    }),
    { seed: SEED, numRuns: 400, interruptAfterTimeLimit: 40_000, markInterruptAsFailure: false },
  );
  assert.deepEqual([...statuses].sort(), [200, 401, 422], 'every kind of answer was reached');
});

test('the server is healthy after the fuzzing', async () => {
  const res = await h.request('GET', '/health');
  assert.equal(res.status, 200);
  const push = await h.request('POST', `/hooks/github/${connections.github}`, {
    rawBody: JSON.stringify(githubPush(REPO, 'main', 'f'.repeat(40))),
    headers: {
      'content-type': 'application/json',
      'x-github-event': 'push',
      'x-github-delivery': randomUUID(),
      'x-hub-signature-256': `sha256=${createHmac('sha256', SECRET)
        .update(JSON.stringify(githubPush(REPO, 'main', 'f'.repeat(40))))
        .digest('hex')}`,
    },
  });
  assert.equal(push.status, 200, push.raw);
});

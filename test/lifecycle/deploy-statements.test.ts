/**
 * What one deployment costs the database, end to end (accepted through the API, carried out by a
 * worker): the statements and the commits. A guard against regressions, not a timing.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { type Harness, startHarness, type Tenant, VALID_SERVICE } from '../helpers/harness.ts';
import { pollUntil } from '../helpers/poll.ts';

let h: Harness;
let t: Tenant;
before(async () => {
  h = await startHarness({ rateLimitPerMin: 1_000_000 });
  t = await h.tenant();
});
after(() => h.close());

test("one deployment costs at most 15 statements, its log written by one statement before each commit's events, the run reading in one statement, its outcome and the job removal one statement", async () => {
  const created = await h.request('POST', `/v1/environments/${t.envId}/services`, {
    token: t.token,
    body: VALID_SERVICE.docker,
  });
  const serviceId = created.body.data.service.id;
  const worker = await h.startWorker();
  // Warm: the first deployment provisions what later ones reuse.
  const first = await h.request('POST', `/v1/environments/${t.envId}/services/${serviceId}/deploy`, {
    token: t.token,
    body: {},
  });
  const ended = async (id: string) =>
    pollUntil('the deployment to succeed', async () => {
      const row = await h.deps.store.db
        .selectFrom('deployments')
        .select('state')
        .where('id', '=', id)
        .executeTakeFirst();
      return row?.state === 'success' ? true : undefined;
    });
  await ended(first.body.data.deployment_id);
  await worker.stop();

  h.queries.length = 0;
  const second = await h.request('POST', `/v1/environments/${t.envId}/services/${serviceId}/deploy`, {
    token: t.token,
    body: {},
  });
  const id = second.body.data.deployment_id as string;
  const worker2 = await h.startWorker();
  await ended(id);
  await worker2.stop();
  // Berth's own statements: not the simulated provider's tables, not idle workers' empty claims or
  // lease renewals, not the token lookup or the rate-limit window, and not this test's polling.
  const related = h.queries.filter(
    (q) =>
      !/"?sim_\w+"?/.test(q) &&
      !/UPDATE jobs SET locked_by/.test(q) &&
      // A lease renewal comes with time, not with the deployment (a loaded machine makes one).
      !q.startsWith('update "jobs" set "locked_until"') &&
      !q.includes('rate_limit_windows') &&
      !q.includes('api_tokens') &&
      !q.startsWith('select "state" from "deployments"'),
  );
  // Less a write of the log alone: the rollout's lines waiting past the writer's flush interval, which
  // a loaded machine may make (at most one).
  const { own, alone } = withoutLogAlone(related);
  const statements = own.filter((q) => !/^(begin|commit|rollback)$/i.test(q.trim()));
  // Accept (5): scope, lock, insert (with the previous deployment's state), service, the commit's
  // statement (the events, the job with its notification, the audit entry and the log's first lines).
  // Start (4): the run's one read (the deployment with its service and environment, and what the run
  // needs besides: the secrets, the deployed domains, the dependencies; its cancel flag is the cancel
  // watch's first look), the start (one statement), the job's fence (held last: a worker paused before
  // it leaves the job free for another, test/process/fencing.test.ts), the events with the log's
  // lines. Run (1): the snapshot a rollback restores (ops config and variables). Outcome (2): one
  // statement (the job's removal under the fence, the deployment, its service, the observation and
  // the look for a deploy_failed alert to resolve), the events with the log's last lines. And the
  // log's statement before each of the three commits' events (3). Folded into the events' statements
  // it was 12, and cost the database more CPU than the three statements (docs/performance.md).
  assert.ok(statements.length <= 15, `${statements.length} statements:\n${statements.join('\n')}`);
  // The log's lines, steps and timeline are written by one statement in each of the three commits
  // (with their lock, their notification and the count the bound is checked against), just before
  // the events' statement, and nothing is trimmed under the bound.
  const log = own.filter((q) => /deployment_logs|deployment_operations|deployment_timeline/.test(q));
  assert.equal(log.length, 3, log.join('\n'));
  for (const q of log) {
    assert.match(q, /^WITH log_locked/);
    assert.match(own[own.indexOf(q) + 1] ?? '', EVENTS);
  }
  assert.ok(alone <= 1, `${alone} writes of the log alone`);
  assert.ok(!h.queries.some((q) => q.includes('earlier lines dropped')), 'no trim under the bound');
  // And its lines arrived, in order, with its steps and timeline.
  const db = h.deps.store.db;
  const lines = await db
    .selectFrom('deployment_logs')
    .select(['step', 'line'])
    .where('deployment_id', '=', id)
    .orderBy('seq')
    .execute();
  assert.match(lines[0]?.line ?? '', / accepted$/);
  assert.deepEqual(lines[1], { step: 'queue', line: 'Queued' });
  assert.ok(
    lines.some((l) => l.step === 'queue' && /^Started \(attempt 1 of \d+\)$/.test(l.line)),
    JSON.stringify(lines),
  );
  assert.deepEqual(lines.at(-1), { step: 'outcome', line: 'Deployment succeeded' });
  const steps = await db
    .selectFrom('deployment_operations')
    .select(['step', 'state'])
    .where('deployment_id', '=', id)
    .execute();
  for (const step of ['accept', 'queue', 'outcome'])
    assert.deepEqual(
      steps.find((s) => s.step === step),
      { step, state: 'success' },
      JSON.stringify(steps),
    );
  const marks = await db
    .selectFrom('deployment_timeline')
    .select('mark')
    .where('deployment_id', '=', id)
    .orderBy('at')
    .execute();
  assert.deepEqual([marks[0]?.mark, marks[1]?.mark, marks.at(-1)?.mark], ['accepted', 'claimed', 'success']);
  if (h.deps.store.kind === 'postgres') {
    // The outcome and the job's removal commit together, in one statement: the job removed under the
    // claim's fence gates the deployment's move.
    assert.ok(
      own.some((q) => /DELETE FROM jobs[\s\S]*UPDATE deployments SET "state"/.test(q)),
      own.join('\n'),
    );
    // Three commits: accepting, the start (with its log line), the outcome with the job's removal
    // (besides a write of the log alone, which a loaded machine may make).
    const commits = own.filter((q, i) => q.trim() === 'commit' && own[i - 1]?.trim() !== 'begin');
    assert.equal(commits.length, 3, own.join('\n'));
  }
});

const EVENTS = /^WITH input AS[\s\S]*INSERT INTO events/;
const isTransaction = (q: string | undefined) => /^(begin|commit)$/.test(q?.trim() ?? '');

/**
 * `queries` less the transactions that write the log alone (DeploymentLogWriter's flush: a begin, the
 * log's statement, its commit), and how many there were. The log written at a commit is followed by
 * that commit's events statement; one written alone is not. On Postgres the statements come from
 * several connections and are listed as they end, so the begin and commit taken out with it are the
 * last begin before and the first commit after, and a begin and commit left with nothing between go too.
 */
function withoutLogAlone(queries: string[]): { own: string[]; alone: number } {
  const own = [...queries];
  let alone = 0;
  for (let i = own.length - 1; i >= 0; i--) {
    if (!own[i]?.startsWith('WITH log_locked')) continue;
    const next = own.findIndex((q, j) => j > i && !isTransaction(q));
    if (EVENTS.test(own[next] ?? '')) continue;
    const commit = own.findIndex((q, j) => j > i && q.trim() === 'commit');
    if (commit >= 0) own.splice(commit, 1);
    own.splice(i, 1);
    const begin = own.slice(0, i).findLastIndex((q) => q.trim() === 'begin');
    if (begin >= 0) own.splice(begin, 1);
    alone++;
  }
  for (let i = own.length - 2; i >= 0; i--)
    if (own[i]?.trim() === 'begin' && own[i + 1]?.trim() === 'commit') own.splice(i, 2);
  return { own, alone };
}

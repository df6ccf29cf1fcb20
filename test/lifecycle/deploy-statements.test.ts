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

test('one deployment costs at most 15 statements with its 3 log writes (12 besides), the run reading in one statement, its outcome and the job removal one statement', async () => {
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
  const worker2 = await h.startWorker();
  await ended(second.body.data.deployment_id);
  await worker2.stop();
  // Berth's own statements: not the simulated provider's tables, not idle workers' empty claims or
  // lease renewals, not the token lookup or the rate-limit window, the deployment's log lines, and not this test's polling.
  const own = h.queries.filter(
    (q) =>
      !/"?sim_\w+"?/.test(q) &&
      !/UPDATE jobs SET locked_by/.test(q) &&
      // A lease renewal comes with time, not with the deployment (a loaded machine makes one).
      !q.startsWith('update "jobs" set "locked_until"') &&
      !q.includes('rate_limit_windows') &&
      !q.includes('api_tokens') &&
      // The deployment's log (its lines, steps and their notifications) is counted apart.
      !/deployment_logs|deployment_operations|^SELECT pg_advisory_xact_lock\(hashtext|pg_notify\(\$1, \$2\)/.test(
        q,
      ) &&
      !q.startsWith('select "state" from "deployments"'),
  );
  const statements = own.filter((q) => !/^(begin|commit|rollback)$/i.test(q.trim()));
  // Accept (5): scope, lock, insert (with the previous deployment's state), service, the commit's
  // statement (the events, the job with its notification and the audit entry). Start (4):
  // the run's one read (the deployment with its service and environment, and what the run needs
  // besides: the secrets, the deployed domains, the dependencies; its cancel flag is the cancel watch's
  // first look), the start (one statement), the job's fence (held last: a worker paused before it
  // leaves the job free for another, test/process/fencing.test.ts), the events. Run (1): the snapshot a
  // rollback restores (ops config and variables). Outcome (2): one statement (the job's removal under
  // the fence, the deployment, its service, the observation and the look for a deploy_failed alert to
  // resolve), the events.
  assert.ok(statements.length <= 12, `${statements.length} statements:\n${statements.join('\n')}`);
  // The log: one statement per write (the lock with its notification, the lines, the steps' changes,
  // the timeline and the count the bound is checked against, as CTEs), three writes a deployment:
  // accepted, started, the outcome (15 statements in all); one more when the rollout's lines wait past
  // the writer's flush interval (a loaded machine). It was four statements per write, and one per step
  // change before.
  const log = h.queries.filter(
    (q) =>
      /deployment_logs|deployment_operations|^SELECT pg_advisory_xact_lock\(hashtext|pg_notify\(\$1, \$2\)/.test(
        q,
      ) && !q.startsWith('select "state" from "deployments"'),
  );
  assert.ok(log.length <= 4, `${log.length} log statements:\n${log.join('\n')}`);
  if (h.deps.store.kind === 'postgres') {
    // The outcome and the job's removal commit together, in one statement: the job removed under the
    // claim's fence gates the deployment's move.
    const last = own.lastIndexOf('begin');
    const outcome = own.slice(last, own.indexOf('commit', last) + 1);
    assert.ok(
      outcome.some((q) => /DELETE FROM jobs[\s\S]*UPDATE deployments SET "state"/.test(q)),
      outcome.join('\n'),
    );
    // Three commits: accepting, the start (with its log line), the outcome with the job's removal
    // (besides a write of the log alone, which a loaded machine may make).
    const commits = own.filter((q, i) => q.trim() === 'commit' && own[i - 1]?.trim() !== 'begin');
    assert.equal(commits.length, 3, own.join('\n'));
  }
});

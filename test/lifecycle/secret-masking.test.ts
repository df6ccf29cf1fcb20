import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
import type { DeployLog, DesiredService } from '../../src/providers/provider.ts';
import { githubPush, sendGithub } from '../helpers/git-webhooks.ts';
import { type Harness, startHarness, type Tenant, VALID_SERVICE } from '../helpers/harness.ts';
import { pollUntil } from '../helpers/poll.ts';
import { openSse } from '../helpers/sse.ts';

/**
 * A secret value a user puts into a field that reaches a log, an event, a webhook payload or a failure
 * reason shows there as `[redacted]`, on every path: the deploy body's note and target, a rollback's
 * and a restart's note, a service created with deploy_now, a push's commit author and message. The
 * target is stored as given, since it is what the deployment runs (docs/api.md): the deployment's own
 * record shows it, the event stream and webhook payloads mask it on the way out.
 */
const SECRET = 'sk-live-4f9a8b7c6d5e';
const HOOK_SECRET = 'hook-secret-of-masking';
let h: Harness;
let t: Tenant;
let receiver: Server;
const bodies: string[] = [];

before(async () => {
  h = await startHarness({ webhookAllowPrivate: true, rateLimitPerMin: 100_000 });
  await h.startWorker();
  t = await h.tenant();
  receiver = createServer((req, res) => {
    let body = '';
    req.on('data', (chunk) => {
      body += chunk;
    });
    req.on('end', () => {
      bodies.push(body);
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  const hook = await h.request('POST', '/v1/webhooks', {
    token: t.token,
    body: { url: `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/in` },
  });
  assert.equal(hook.status, 200, hook.raw);
});
after(async () => {
  await h.close();
  await new Promise((resolve) => receiver.close(resolve));
});

/** An event's or a payload's data without the one field that keeps the target as given. */
function withoutTarget(data: Record<string, unknown>): string {
  const { docker_image_tag: _target, ...rest } = data;
  return JSON.stringify(rest);
}

interface Deployment {
  id: string;
  state: string;
  note: string;
  failure_reason: string;
  git_commit_message: string;
}

async function finished(id: string): Promise<Deployment> {
  return pollUntil(`deployment ${id} to end`, async () => {
    const res = await h.request('GET', `/v1/deployments/${id}`, { token: t.token });
    const d = res.body.data.deployment;
    return d.state === 'success' || d.state === 'failed' ? d : undefined;
  });
}

async function logOf(id: string): Promise<string> {
  const res = await h.request('GET', `/v1/deployments/${id}/logs`, { token: t.token });
  assert.equal(res.status, 200, res.raw);
  return res.body.data.lines.map((l: { line: string }) => l.line).join('\n');
}

test('a secret value in every user-supplied field is masked in logs, events, webhook payloads and failure reasons', async () => {
  const put = await h.request('PUT', `/v1/environments/${t.envId}/secrets`, {
    token: t.token,
    body: { secrets: [{ key: 'API_KEY', value: SECRET, is_sensitive: true }] },
  });
  assert.equal(put.status, 200, put.raw);
  const created = await h.request('POST', `/v1/environments/${t.envId}/services`, {
    token: t.token,
    body: { ...VALID_SERVICE.docker, deploy_now: true },
  });
  assert.equal(created.status, 200, created.raw);
  const service = created.body.data.service;
  const serviceUrl = `/v1/environments/${t.envId}/services/${service.id}`;
  const read = await h.request('GET', serviceUrl, { token: t.token });
  const first = await finished(read.body.data.service.latest_deployment.id as string);
  assert.equal(first.state, 'success');

  const deploy = async (body: Record<string, unknown>, path = 'deploy') => {
    const res = await h.request('POST', `${serviceUrl}/${path}`, { token: t.token, body });
    assert.equal(res.status, 200, res.raw);
    return finished(res.body.data.deployment_id ?? res.body.data.deployment.id);
  };
  const ids = [first.id];
  const good = await deploy({ docker_image_tag: 'v2', note: `rotated the key ${SECRET} today` });
  assert.equal(good.state, 'success');
  ids.push(good.id);
  const failed = await deploy({ docker_image_tag: `fail-${SECRET}`, note: SECRET });
  assert.equal(failed.state, 'failed');
  assert.match(failed.failure_reason, /\[redacted\]/);
  ids.push(failed.id);
  // A provider error that carries the value: the retry's log line and the interim reason mask it.
  const provider = h.deps.provider;
  const realApply = provider.apply.bind(provider);
  let thrown = false;
  provider.apply = async (request: DesiredService, signal: AbortSignal, log?: DeployLog) => {
    if (request.target.docker_image_tag === 'flaky' && !thrown) {
      thrown = true;
      throw new Error(`the cloud API echoed ${SECRET}`);
    }
    return realApply(request, signal, log);
  };
  const retried = await deploy({ docker_image_tag: 'flaky' });
  assert.equal(retried.state, 'success');
  assert.ok(thrown);
  assert.match(await logOf(retried.id), /failed, retrying: the cloud API echoed \[redacted\]/);
  ids.push(retried.id);
  provider.apply = realApply;
  ids.push((await deploy({ note: `back to ${SECRET}` }, 'rollback')).id);
  ids.push((await deploy({ note: `again ${SECRET}` }, 'restart')).id);

  for (const id of ids) {
    const log = await logOf(id);
    assert.equal(log.includes(SECRET), false, `log of ${id}:\n${log}`);
    const read = await h.request('GET', `/v1/deployments/${id}`, { token: t.token });
    assert.equal(read.body.data.deployment.failure_reason.includes(SECRET), false);
    assert.equal(read.body.data.deployment.note.includes(SECRET), false);
  }
  assert.match(await logOf(good.id), /accepted \(note: rotated the key \[redacted\] today\)/);

  // A push whose commit author and message carry the value.
  const connection = await h.gitConnection(t, 'github', { webhook_secret: HOOK_SECRET });
  const git = await h.request('POST', `/v1/environments/${t.envId}/services`, {
    token: t.token,
    body: { ...VALID_SERVICE.github, git_repo_full_name: 'acme/masked', auto_deploy: true },
  });
  assert.equal(git.status, 200, git.raw);
  const push = githubPush('acme/masked', 'main', 'b'.repeat(40), `leaked ${SECRET} in a commit`);
  push.head_commit.author.name = `Dev ${SECRET}`;
  const pushed = await sendGithub(h, HOOK_SECRET, 'push', push, undefined, connection);
  assert.equal(pushed.status, 200, pushed.raw);
  const fromPush = await finished(pushed.body.data.deployment_ids[0]);
  assert.equal(fromPush.state, 'success');
  assert.match(fromPush.git_commit_message, /^leaked \[redacted\] in a commit$/);
  ids.push(fromPush.id);
  const pushLog = await logOf(fromPush.id);
  assert.equal(pushLog.includes(SECRET), false, pushLog);
  assert.match(pushLog, /by Dev \[redacted\] <dev@acme\.test>: leaked \[redacted\] in a commit/);

  const events = await h.deps.store.db
    .selectFrom('events')
    .select(['type', 'data'])
    .where('account_id', '=', t.accountId)
    .where('type', 'like', 'deployment.%')
    .execute();
  assert.ok(events.length >= ids.length * 3, `${events.length} deployment events`);
  // Stored: everything but the target masked (the target is what the deployment runs).
  for (const e of events) {
    const data = e.data as Record<string, unknown>;
    assert.equal(withoutTarget(data).includes(SECRET), false, `${e.type}: ${JSON.stringify(data)}`);
  }
  assert.ok(
    events.some((e) => JSON.stringify(e.data).includes(SECRET)),
    'a target holding the secret is stored as given',
  );
  // Shown: nothing, the target included, in the event stream and in webhook payloads.
  await h.app.listen({ port: 0, host: '127.0.0.1' });
  const stream = await openSse(
    `http://127.0.0.1:${(h.app.server.address() as AddressInfo).port}/v1/events?last_event_id=0`,
    t.token,
  );
  try {
    const streamed = await stream.until(
      'the deployment events streamed',
      (got) => got.filter((e) => String(e.event).startsWith('deployment.')).length >= events.length,
    );
    for (const e of streamed)
      assert.equal(JSON.stringify(e.data).includes(SECRET), false, JSON.stringify(e.data));
    assert.ok(
      JSON.stringify(streamed.map((e) => e.data)).includes('fail-[redacted]'),
      'the target is masked',
    );
  } finally {
    stream.close();
  }
  await pollUntil('the deployment events delivered', async () =>
    bodies.filter((b) => b.includes('"deployment.')).length >= events.length ? true : undefined,
  );
  for (const body of bodies) assert.equal(body.includes(SECRET), false, body);
});

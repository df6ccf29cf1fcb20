import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { type Harness, startHarness, type Tenant, VALID_SERVICE } from '../helpers/harness.ts';
import { pollUntil } from '../helpers/poll.ts';

/**
 * A secret value a user types into a field that reaches a log or a failure reason shows there as
 * `[redacted]`, on every path: the deploy body's note and target, a rollback's and
 * a restart's note, a service created with deploy_now.
 */
const SECRET = 'sk-live-4f9a8b7c6d5e';
let h: Harness;
let t: Tenant;

before(async () => {
  h = await startHarness({ webhookAllowPrivate: true, rateLimitPerMin: 100_000 });
  await h.startWorker();
  t = await h.tenant();
});
after(() => h.close());

interface Deployment {
  id: string;
  state: string;
  note: string;
  failure_reason: string;
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

test('a secret value in every user-supplied field is masked in logs and failure reasons', async () => {
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
});

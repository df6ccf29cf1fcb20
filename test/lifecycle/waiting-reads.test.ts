/**
 * Waiting reads (RFC 7240 `Prefer: wait`): held until the resource changes or the time passes, and
 * costing the database nothing while held.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { preferredWait } from '../../src/api/read-cache.ts';
import { acceptedDeployment } from '../helpers/deployments.ts';
import { type Harness, type Reply, startHarness, type Tenant } from '../helpers/harness.ts';
import { pollUntil } from '../helpers/poll.ts';

let h: Harness;
let t: Tenant;
before(async () => {
  h = await startHarness({ rateLimitPerMin: 1_000_000 });
  t = await h.tenant();
});
after(() => h.close());

const queuedDeployment = () => acceptedDeployment(h, t);

/** The ETag of `url` once it is served from the cache (the notification connection may be coming up). */
async function cachedEtag(url: string): Promise<string> {
  return pollUntil(`${url} to be cached`, async () => {
    const res = await h.request('GET', url, { token: t.token });
    h.queries.length = 0;
    const again = await h.request('GET', url, { token: t.token });
    const reads = h.queries.filter((q) => !q.includes('rate_limit_windows') && !q.includes('api_tokens'));
    return reads.length === 0 && again.headers.etag === res.headers.etag
      ? String(res.headers.etag)
      : undefined;
  });
}

const hold = (url: string, etag: string, wait: number): Promise<Reply> =>
  h.request('GET', url, { token: t.token, headers: { 'if-none-match': etag, prefer: `wait=${wait}` } });

const setNote = (deploymentId: string, note: string) =>
  h.deps.store.db.updateTable('deployments').set({ note }).where('id', '=', deploymentId).execute();

const deploymentReads = () =>
  h.queries.filter((q) => q.includes('from "deployments"') && q.startsWith('select'));

test('a waiting request returns as soon as the resource changes, with the new representation', async () => {
  const { deploymentId } = await queuedDeployment();
  const url = `/v1/deployments/${deploymentId}`;
  const etag = await cachedEtag(url);
  const held = hold(url, etag, 60);
  await pollUntil('the request to be held', async () => (h.app.readCache.waiting === 1 ? true : undefined));
  await setNote(deploymentId, 'changed while held');
  const res = await held;
  assert.equal(res.status, 200);
  assert.equal(res.body.data.deployment.note, 'changed while held');
  assert.notEqual(res.headers.etag, etag);
  assert.equal(res.headers['preference-applied'], 'wait=60');
});

test('a waiting request is answered 304 at its deadline when nothing changed', async () => {
  const { serviceId } = await queuedDeployment();
  const url = `/v1/environments/${t.envId}/services/${serviceId}`;
  const etag = await cachedEtag(url);
  const res = await hold(url, etag, 1);
  assert.equal(res.status, 304);
  assert.equal(res.raw, '');
  assert.equal(res.headers.etag, etag);
  assert.equal(res.headers['preference-applied'], 'wait=1');
});

test('without a current If-None-Match the answer is immediate', async () => {
  const { deploymentId } = await queuedDeployment();
  const url = `/v1/deployments/${deploymentId}`;
  const stale = await h.request('GET', url, { token: t.token, headers: { prefer: 'wait=60' } });
  assert.equal(stale.status, 200);
  assert.equal(stale.headers['preference-applied'], undefined);
  const other = await hold(url, '"not-current"', 60);
  assert.equal(other.status, 200);
});

test('hundreds of waiting requests leave the database idle, and one change costs one read', async () => {
  const { deploymentId } = await queuedDeployment();
  const url = `/v1/deployments/${deploymentId}`;
  const etag = await cachedEtag(url);
  const COUNT = 300;

  // Held to their deadline: not one query from the moment they are all held until they are answered.
  const expiring = Array.from({ length: COUNT }, () => hold(url, etag, 2));
  await pollUntil('every request to be held', async () =>
    h.app.readCache.waiting === COUNT ? true : undefined,
  );
  h.queries.length = 0;
  const answers = await Promise.all(expiring);
  assert.deepEqual(
    h.queries.filter((q) => !q.includes('rate_limit_windows')),
    [],
    'held requests ran no query',
  );
  assert.ok(answers.every((res) => res.status === 304));

  // Woken by a change: all answered with it, from one read of the deployment between them.
  const woken = Array.from({ length: COUNT }, () => hold(url, etag, 60));
  await pollUntil('every request to be held', async () =>
    h.app.readCache.waiting === COUNT ? true : undefined,
  );
  h.queries.length = 0;
  await setNote(deploymentId, 'one change');
  const changed = await Promise.all(woken);
  assert.ok(changed.every((res) => res.status === 200 && res.body.data.deployment.note === 'one change'));
  assert.ok(deploymentReads().length <= 1, `one read for all, ran:\n${deploymentReads().join('\n')}`);
});

test('the OpenAPI document names Prefer on the deployment, the service and its custom domains', async () => {
  const doc = (await h.request('GET', '/v1/openapi.json')).body;
  for (const path of [
    '/v1/deployments/{deploymentId}',
    '/v1/environments/{envId}/services/{serviceId}',
    '/v1/environments/{envId}/services/{serviceId}/custom-domains',
  ]) {
    const names = doc.paths[path].get.parameters
      .filter((p: { in: string }) => p.in === 'header')
      .map((p: { name: string }) => p.name);
    assert.deepEqual(names.sort(), ['if-none-match', 'prefer'], path);
  }
});

test('Prefer: wait is read as RFC 7240 writes it, and capped at 60 seconds', () => {
  assert.equal(preferredWait(undefined), undefined);
  assert.equal(preferredWait('wait=10'), 10);
  assert.equal(preferredWait('respond-async, wait=100'), 60);
  assert.equal(preferredWait('Wait = 5'), 5);
  assert.equal(preferredWait('wait=5; foo=bar'), 5);
  assert.equal(preferredWait(['handling=lenient', 'wait=3']), 3);
  assert.equal(preferredWait('wait=soon'), undefined);
  assert.equal(preferredWait('wait=-1'), undefined);
  assert.equal(preferredWait('return=minimal'), undefined);
});

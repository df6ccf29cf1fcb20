import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
import { type Harness, startHarness, type Tenant, VALID_SERVICE } from '../helpers/harness.ts';
import { pollUntil } from '../helpers/poll.ts';
import { openSse, type SseReader } from '../helpers/sse.ts';

/**
 * Open streams (GET /v1/events, log follows) live only as long as their token may read, and a token or
 * an account holds only so many at once. No worker runs: a deployment stays queued, so its log follow
 * stays open.
 */
const PER_TOKEN = 2;
const PER_ACCOUNT = 3;
let h: Harness;
let baseUrl: string;
before(async () => {
  h = await startHarness({ streamsPerToken: PER_TOKEN, streamsPerAccount: PER_ACCOUNT });
  await h.app.listen({ port: 0, host: '127.0.0.1' });
  baseUrl = `http://127.0.0.1:${(h.app.server.address() as AddressInfo).port}`;
});
after(() => h.close());

async function secondToken(t: Tenant): Promise<{ token: string; tokenId: string }> {
  const res = await h.admin('POST', `/accounts/${t.accountId}/api-tokens`);
  assert.equal(res.status, 200, res.raw);
  return { token: res.body.data.api_token, tokenId: res.body.data.token_id };
}

/** A log follow that stays open: its deployment is queued and nothing runs it. */
async function followUrl(t: Tenant): Promise<string> {
  const created = await h.request('POST', `/v1/environments/${t.envId}/services`, {
    token: t.token,
    body: VALID_SERVICE.docker,
  });
  assert.equal(created.status, 200, created.raw);
  const deployed = await h.request(
    'POST',
    `/v1/environments/${t.envId}/services/${created.body.data.service.id}/deploy`,
    { token: t.token, body: { docker_image_tag: 'v1' } },
  );
  assert.equal(deployed.status, 200, deployed.raw);
  return `${baseUrl}/v1/deployments/${deployed.body.data.deployment_id}/logs?follow=true`;
}

/** Resolves with how long after `since` the stream ended; rejects if it is still open after 5 s. */
async function endedWithin(stream: SseReader, since: number): Promise<number> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error('the stream is still open 5 s later')), 5000);
  });
  try {
    await Promise.race([stream.ended, late]);
    return Date.now() - since;
  } finally {
    clearTimeout(timer);
  }
}

test("revoking a token ends its open streams within a second; the account's other tokens keep theirs", async () => {
  const t = await h.tenant();
  const other = await secondToken(t);
  const events = await openSse(`${baseUrl}/v1/events`, t.token);
  const follow = await openSse(await followUrl(t), t.token);
  const kept = await openSse(`${baseUrl}/v1/events`, other.token);
  assert.deepEqual([events.status, follow.status, kept.status], [200, 200, 200]);

  const revoked = await h.admin('DELETE', `/api-tokens/${t.tokenId}`);
  assert.equal(revoked.status, 200, revoked.raw);
  const at = Date.now();
  const [eventsMs, followMs] = await Promise.all([endedWithin(events, at), endedWithin(follow, at)]);
  assert.ok(eventsMs < 1000 && followMs < 1000, `ended after ${eventsMs} and ${followMs} ms`);
  assert.equal((await h.request('GET', '/v1/events', { token: t.token })).status, 401);

  // The other token's stream still delivers.
  await h.request('PUT', `/v1/environments/${t.envId}/secrets`, {
    token: other.token,
    body: { secrets: [{ key: 'AFTER_REVOKE', value: 'x' }] },
  });
  await kept.until('the event after the revocation', (got) =>
    got.some((e) => e.data.data?.key === 'AFTER_REVOKE'),
  );
  kept.close();
});

test("an account's plan going to none ends its streams; a plan that still reads keeps them", async () => {
  const t = await h.tenant();
  const stream = await openSse(`${baseUrl}/v1/events`, t.token);
  assert.equal(stream.status, 200);
  const starter = await h.admin('PATCH', `/accounts/${t.accountId}`, { plan: 'starter' });
  assert.equal(starter.status, 200, starter.raw);
  await h.request('PUT', `/v1/environments/${t.envId}/secrets`, {
    token: t.token,
    body: { secrets: [{ key: 'ON_STARTER', value: 'x' }] },
  });
  await stream.until('an event on the starter plan', (got) =>
    got.some((e) => e.data.data?.key === 'ON_STARTER'),
  );

  const none = await h.admin('PATCH', `/accounts/${t.accountId}`, { plan: 'none' });
  assert.equal(none.status, 200, none.raw);
  const ms = await endedWithin(stream, Date.now());
  assert.ok(ms < 1000, `ended after ${ms} ms`);
  assert.equal((await h.request('GET', '/v1/events', { token: t.token })).status, 403);
});

test('a token holds at most its cap of open streams and an account its own; past either a 429 says so', async () => {
  const t = await h.tenant();
  const other = await secondToken(t);
  const open: SseReader[] = [];
  for (let i = 0; i < PER_TOKEN; i++) open.push(await openSse(`${baseUrl}/v1/events`, t.token));
  assert.deepEqual(
    open.map((s) => s.status),
    [200, 200],
  );
  const overToken = await h.request('GET', '/v1/events', { token: t.token });
  assert.equal(overToken.status, 429, overToken.raw);
  assert.equal(overToken.body.error_code, 'rate_limited');
  assert.match(overToken.body.message, /API token already has 2 streams open \(at most 2\)/);
  // A log follow counts the same.
  const overFollow = await h.request('GET', `${new URL(await followUrl(t)).pathname}?follow=true`, {
    token: t.token,
  });
  assert.equal(overFollow.status, 429, overFollow.raw);

  // The account's other token may open what is left of the account's cap, and no more.
  open.push(await openSse(`${baseUrl}/v1/events`, other.token));
  assert.equal(open.at(-1)?.status, 200);
  const overAccount = await h.request('GET', '/v1/events', { token: other.token });
  assert.equal(overAccount.status, 429, overAccount.raw);
  assert.match(overAccount.body.message, /account already has 3 streams open \(at most 3\)/);
  // Another account is not affected.
  const stranger = await h.tenant();
  const theirs = await openSse(`${baseUrl}/v1/events`, stranger.token);
  assert.equal(theirs.status, 200);
  theirs.close();

  // A stream that closes frees its place.
  open.shift()?.close();
  await pollUntil('a place to be free again', async () => {
    const again = await openSse(`${baseUrl}/v1/events`, t.token);
    if (again.status !== 200) return undefined;
    open.push(again);
    return true;
  });
  for (const s of open) s.close();
});

test("a member's log follow ends when the role drops below developer; the events stream a viewer may read stays", async () => {
  const t = await h.tenant();
  const url = await followUrl(t);
  const user = await h.admin('POST', '/users', {
    email: `dev-${t.accountId}@example.com`,
    display_name: 'Dev',
  });
  const userId = user.body.data.user.id as string;
  await h.admin('PUT', `/accounts/${t.accountId}/members/${userId}`, { role: 'developer' });
  const issued = await h.admin('POST', `/accounts/${t.accountId}/members/${userId}/api-tokens`, {});
  const token = issued.body.data.api_token as string;
  const follow = await openSse(url, token);
  const events = await openSse(`${baseUrl}/v1/events`, token);
  assert.deepEqual([follow.status, events.status], [200, 200]);

  const lowered = await h.admin('PUT', `/accounts/${t.accountId}/members/${userId}`, { role: 'viewer' });
  assert.equal(lowered.status, 200, lowered.raw);
  const at = Date.now();
  const ms = await endedWithin(follow, at);
  assert.ok(ms < 1000, `the log follow ended after ${ms} ms`);
  // Viewers read events: that stream still delivers.
  await h.request('PUT', `/v1/environments/${t.envId}/secrets`, {
    token: t.token,
    body: { secrets: [{ key: 'AFTER_LOWERING', value: 'x' }] },
  });
  await events.until('the event after the role change', (got) =>
    got.some((e) => e.data.data?.key === 'AFTER_LOWERING'),
  );

  // Removed: everything the member held ends.
  assert.equal((await h.admin('DELETE', `/accounts/${t.accountId}/members/${userId}`)).status, 200);
  const removedMs = await endedWithin(events, Date.now());
  assert.ok(removedMs < 1000, `the events stream ended after ${removedMs} ms`);
});

test("a session's streams end with it, and a removed member's sessions' streams end too", async () => {
  const t = await h.tenant();
  const user = await h.admin('POST', '/users', { email: `${t.accountId}@example.com`, display_name: 'Di' });
  const userId = user.body.data.user.id as string;
  await h.admin('PUT', `/accounts/${t.accountId}/members/${userId}`, { role: 'viewer' });
  const signIn = async () => {
    const link = await h.admin('POST', `/accounts/${t.accountId}/members/${userId}/sign-in-links`);
    const res = await h.request('POST', '/auth/sign-in-link', { body: { token: link.body.data.token } });
    assert.equal(res.status, 200, res.raw);
    const cookie = String([res.headers['set-cookie']].flat()[0]).split(';')[0] as string;
    return { cookie, id: res.body.data.session_id as string, csrf: res.body.data.csrf_token as string };
  };
  const one = await signIn();
  const two = await signIn();
  const first = await openSse(`${baseUrl}/v1/events`, '', { cookie: one.cookie });
  const second = await openSse(`${baseUrl}/v1/events`, '', { cookie: two.cookie });
  assert.deepEqual([first.status, second.status], [200, 200]);

  const ended = await h.request('DELETE', `/v1/sessions/${one.id}`, {
    headers: { cookie: two.cookie, 'x-csrf-token': two.csrf },
  });
  assert.equal(ended.status, 200, ended.raw);
  const at = Date.now();
  const firstMs = await endedWithin(first, at);
  assert.ok(firstMs < 1000, `ended after ${firstMs} ms`);

  assert.equal((await h.admin('DELETE', `/accounts/${t.accountId}/members/${userId}`)).status, 200);
  const removedAt = Date.now();
  const secondMs = await endedWithin(second, removedAt);
  assert.ok(secondMs < 1000, `ended after ${secondMs} ms`);
});

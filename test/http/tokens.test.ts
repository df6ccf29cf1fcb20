import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { type Harness, startHarness, type Tenant, VALID_SERVICE } from '../helpers/harness.ts';
import { pollUntil } from '../helpers/poll.ts';

/** Tokens people make (POST/GET/DELETE /v1/tokens), members' tokens, and audit entries naming people. */
let h: Harness;
let t: Tenant;
before(async () => {
  h = await startHarness({ rateLimitPerMin: 10_000 });
  t = await h.tenant();
});
after(() => h.close());

async function make(token: string, body: Record<string, unknown>) {
  return h.request('POST', '/v1/tokens', { token, body });
}

async function member(role: string, email = `${randomUUID()}@example.com`) {
  const user = await h.admin('POST', '/users', { email, display_name: 'Ada' });
  assert.equal(user.status, 200, user.raw);
  const userId = user.body.data.user.id as string;
  const set = await h.admin('PUT', `/accounts/${t.accountId}/members/${userId}`, { role });
  assert.equal(set.status, 200, set.raw);
  const issued = await h.admin('POST', `/accounts/${t.accountId}/members/${userId}/api-tokens`, {});
  assert.equal(issued.status, 200, issued.raw);
  return { userId, email, token: issued.body.data.api_token as string };
}

describe('POST /v1/tokens', () => {
  test('shows the token once; the list never shows it again, and it acts with its role', async () => {
    const res = await make(t.token, { name: 'ci', role: 'viewer', read_only: true });
    assert.equal(res.status, 200, res.raw);
    const made = res.body.data.token;
    assert.match(made.token, /^[0-9a-f-]{36}$/);
    assert.equal(made.name, 'ci');
    assert.equal(made.role, 'viewer');
    assert.equal(made.read_only, true);
    assert.equal(made.owner, null, 'made with an operator token: no person owns it');
    const list = await h.request('GET', '/v1/tokens', { token: t.token });
    assert.equal(list.status, 200, list.raw);
    const listed = list.body.data.tokens.find((x: { id: string }) => x.id === made.id);
    assert.equal(listed.token, undefined);
    assert.ok(!list.raw.includes(made.token), 'the token is never shown again');
    const operator = list.body.data.tokens.find((x: { id: string }) => x.id === t.tokenId);
    assert.deepEqual([operator.role, operator.name, operator.owner], ['owner', null, null]);
    // `current`: the token the call was made with, and only that one (what the console warns about).
    assert.deepEqual(
      list.body.data.tokens.filter((x: { current: boolean }) => x.current).map((x: { id: string }) => x.id),
      [t.tokenId],
    );
    assert.equal(made.current, false, 'made with another token');
    assert.equal((await h.request('GET', '/v1/environments', { token: made.token })).status, 200);
    const write = await h.request('POST', `/v1/environments/${t.envId}/services`, {
      token: made.token,
      body: VALID_SERVICE.docker,
    });
    assert.equal(write.status, 403, write.raw);
  });

  test("a role higher than the maker's is a field error on role", async () => {
    const admin = await make(t.token, { name: 'admin', role: 'admin' });
    const res = await make(admin.body.data.token.token, { name: 'escalate', role: 'owner' });
    assert.equal(res.status, 422, res.raw);
    assert.deepEqual(res.body.errors, [
      { field: 'role', error: 'role cannot be higher than your own role (admin)' },
    ]);
    const same = await make(admin.body.data.token.token, { name: 'peer', role: 'admin' });
    assert.equal(same.status, 200, same.raw);
  });

  test('an unknown environment, a past expiry, a missing name: field errors', async () => {
    const env = await make(t.token, { name: 'x', role: 'viewer', environment_ids: [randomUUID()] });
    assert.equal(env.status, 422);
    assert.equal(env.body.errors[0].field, 'environment_ids');
    const past = await make(t.token, { name: 'x', role: 'viewer', expires_at: '2020-01-01T00:00:00.000Z' });
    assert.equal(past.status, 422);
    assert.deepEqual(past.body.errors, [{ field: 'expires_at', error: 'expires_at must be in the future' }]);
    const nameless = await make(t.token, { role: 'viewer' });
    assert.equal(nameless.status, 422);
    assert.equal(nameless.body.errors[0].field, 'name');
  });

  test('an empty name, no environments, an environment twice: each error says what to fix', async () => {
    const empty = await make(t.token, { name: '', role: 'viewer', environment_ids: [] });
    assert.equal(empty.status, 422, empty.raw);
    assert.deepEqual(empty.body.errors, [
      { field: 'name', error: 'name must not be empty' },
      { field: 'environment_ids', error: 'environment_ids must have at least 1 item' },
    ]);
    const twice = await make(t.token, { name: 'x', role: 'viewer', environment_ids: [t.envId, t.envId] });
    assert.equal(twice.status, 422, twice.raw);
    assert.deepEqual(twice.body.errors, [
      {
        field: 'environment_ids',
        error:
          'environment_ids must not repeat an item (environment_ids[0] and environment_ids[1] are the same)',
      },
    ]);
  });

  test('a token that expires works until then', async () => {
    const soon = new Date(Date.now() + 60_000).toISOString();
    const res = await make(t.token, { name: 'soon', role: 'viewer', expires_at: soon });
    assert.equal(res.status, 200, res.raw);
    assert.equal(res.body.data.token.expires_at, soon);
    assert.equal(
      (await h.request('GET', '/v1/environments', { token: res.body.data.token.token })).status,
      200,
    );
  });
});

describe('DELETE /v1/tokens/{id}', () => {
  test("revokes at once; another account's token is not found, as one that never existed", async () => {
    const made = (await make(t.token, { name: 'gone', role: 'developer' })).body.data.token;
    assert.equal((await h.request('GET', '/v1/environments', { token: made.token })).status, 200);
    const res = await h.request('DELETE', `/v1/tokens/${made.id}`, { token: t.token });
    assert.equal(res.status, 200, res.raw);
    assert.equal((await h.request('GET', '/v1/environments', { token: made.token })).status, 401);
    const again = await h.request('DELETE', `/v1/tokens/${made.id}`, { token: t.token });
    assert.equal(again.status, 404);

    const other = await h.tenant();
    const theirs = await h.request('DELETE', `/v1/tokens/${other.tokenId}`, { token: t.token });
    const never = await h.request('DELETE', `/v1/tokens/${randomUUID()}`, { token: t.token });
    assert.equal(theirs.status, 404);
    assert.deepEqual(theirs.body, never.body);
    assert.equal((await h.request('GET', '/v1/environments', { token: other.token })).status, 200);
    const notUuid = await h.request('DELETE', '/v1/tokens/not-a-uuid', { token: t.token });
    assert.equal(notUuid.status, 404);
  });
});

describe('DELETE /v1/tokens/{id}: roles', () => {
  test("an admin cannot revoke a token above its role (the owner's): 403, and the token still works", async () => {
    const admin = (await make(t.token, { name: 'an admin', role: 'admin' })).body.data.token;
    const res = await h.request('DELETE', `/v1/tokens/${t.tokenId}`, { token: admin.token });
    assert.equal(res.status, 403, res.raw);
    assert.equal(res.body.error_code, 'forbidden');
    assert.equal(
      res.body.message,
      'Revoking a token with the owner role needs the owner role: an admin cannot lock the owner out',
    );
    assert.equal((await h.request('GET', '/v1/environments', { token: t.token })).status, 200);

    const peer = (await make(t.token, { name: 'another admin', role: 'admin' })).body.data.token;
    const own = await h.request('DELETE', `/v1/tokens/${peer.id}`, { token: admin.token });
    assert.equal(own.status, 200, 'a token of its own role is revoked');
    const byOwner = (await make(t.token, { name: 'revoked by the owner', role: 'owner' })).body.data.token;
    assert.equal((await h.request('DELETE', `/v1/tokens/${byOwner.id}`, { token: t.token })).status, 200);

    // An owner lowered to developer: their owner token acts, is listed, and is revoked as a developer's.
    await member('owner');
    const lowered = await member('owner');
    const demoted = await h.admin('PUT', `/accounts/${t.accountId}/members/${lowered.userId}`, {
      role: 'developer',
    });
    assert.equal(demoted.status, 200, demoted.raw);
    const tokens = await h.request('GET', '/v1/tokens', { token: t.token });
    const theirs = tokens.body.data.tokens.find(
      (x: { owner: { user_id: string } | null }) => x.owner?.user_id === lowered.userId,
    );
    assert.equal(theirs.role, 'developer');
    const revoked = await h.request('DELETE', `/v1/tokens/${theirs.id}`, { token: admin.token });
    assert.equal(revoked.status, 200, revoked.raw);
  });
});

describe('last_used_at', () => {
  test('set on use, and written at most once a minute however often the token is used', async () => {
    const made = (await make(t.token, { name: 'poller', role: 'viewer' })).body.data.token;
    assert.equal(made.last_used_at, null);
    // The listing uses a token of its own, first used just now: the file's token, used over a minute
    // ago when the file runs slowly, would be written once during the loop and be counted below.
    const lister = (await make(t.token, { name: 'lister', role: 'admin' })).body.data.token;
    const lastUsed = async (id = made.id) => {
      const list = await h.request('GET', '/v1/tokens', { token: lister.token });
      return list.body.data.tokens.find((x: { id: string }) => x.id === id).last_used_at as string | null;
    };
    assert.equal((await h.request('GET', '/v1/environments', { token: made.token })).status, 200);
    // Written off the request's path: it lands shortly after.
    const first = await pollUntil('last_used_at to be set', async () => (await lastUsed()) ?? undefined);
    await pollUntil(
      "the lister's first use to be written",
      async () => (await lastUsed(lister.id)) ?? undefined,
    );
    const before = h.queries.length;
    for (let i = 0; i < 20; i++) {
      assert.equal((await h.request('GET', '/v1/environments', { token: made.token })).status, 200);
    }
    assert.equal(await lastUsed(), first, 'not written again within the minute');
    const writes = h.queries.slice(before).filter((q) => /^update "api_tokens" set "last_used_at"/.test(q));
    assert.deepEqual(writes, [], 'no write for 20 requests');
  });
});

describe("members' tokens", () => {
  test("never do more than the member's role now, and die with the membership", async () => {
    const m = await member('admin');
    // The member makes a token of their own: it belongs to them.
    const own = await make(m.token, { name: 'laptop', role: 'admin' });
    assert.equal(own.status, 200, own.raw);
    assert.deepEqual(own.body.data.token.owner, { user_id: m.userId, email: m.email });
    const mine = own.body.data.token.token as string;
    let n = 0;
    const create = (token: string) =>
      h.request('POST', `/v1/environments/${t.envId}/services`, {
        token,
        body: { ...VALID_SERVICE.docker, name: `Member Service ${'x'.repeat(++n)}` },
      });
    const first = await create(mine);
    assert.equal(first.status, 200, first.raw);

    // Lowered to viewer: both of the member's tokens act as viewers at once.
    await h.admin('PUT', `/accounts/${t.accountId}/members/${m.userId}`, { role: 'viewer' });
    for (const token of [m.token, mine]) {
      const res = await create(token);
      assert.equal(res.status, 403, res.raw);
      assert.equal(res.body.message, 'This call needs the developer role; this token acts as viewer');
      assert.equal((await h.request('GET', '/v1/environments', { token })).status, 200);
    }

    // Listed as they act now, not as they were made.
    const list = await h.request('GET', '/v1/tokens', { token: t.token });
    const listed = list.body.data.tokens.find((x: { id: string }) => x.id === own.body.data.token.id);
    assert.equal(listed.role, 'viewer', list.raw);

    // Removed: the member's tokens stop working.
    assert.equal((await h.admin('DELETE', `/accounts/${t.accountId}/members/${m.userId}`)).status, 200);
    for (const token of [m.token, mine]) {
      assert.equal((await h.request('GET', '/v1/environments', { token })).status, 401);
    }
  });

  test('a membership narrowed to an environment narrows its tokens', async () => {
    const env = await h.admin('POST', `/accounts/${t.accountId}/environments`, { name: 'narrow' });
    const otherEnvId = env.body.data.environment.id;
    const m = await member('developer');
    await h.admin('PUT', `/accounts/${t.accountId}/members/${m.userId}`, {
      role: 'developer',
      environment_ids: [otherEnvId],
    });
    const list = await h.request('GET', '/v1/environments', { token: m.token });
    assert.deepEqual(
      list.body.data.environments.map((e: { id: string }) => e.id),
      [otherEnvId],
    );
    assert.equal(
      (await h.request('GET', `/v1/environments/${t.envId}/services`, { token: m.token })).status,
      404,
    );
    const tokens = await h.request('GET', '/v1/tokens', { token: t.token });
    const listed = tokens.body.data.tokens.find(
      (x: { owner: { user_id: string } | null }) => x.owner?.user_id === m.userId,
    );
    assert.deepEqual(listed.environment_ids, [otherEnvId], 'listed with the environments it reaches');
  });

  test('the admin API refuses an unknown user, a duplicate email and environments of another account', async () => {
    const email = `${randomUUID()}@example.com`;
    assert.equal((await h.admin('POST', '/users', { email, display_name: 'A' })).status, 200);
    const dup = await h.admin('POST', '/users', { email: email.toUpperCase(), display_name: 'B' });
    assert.equal(dup.status, 409, dup.raw);
    const unknown = await h.admin('PUT', `/accounts/${t.accountId}/members/${randomUUID()}`, {
      role: 'viewer',
    });
    assert.equal(unknown.status, 404);
    const m = await member('viewer');
    const other = await h.tenant();
    const foreign = await h.admin('PUT', `/accounts/${t.accountId}/members/${m.userId}`, {
      role: 'viewer',
      environment_ids: [other.envId],
    });
    assert.equal(foreign.status, 422, foreign.raw);
    assert.equal(foreign.body.errors[0].field, 'environment_ids');
  });
});

describe('the audit log names people', () => {
  test('actor, token name, user and user agent; filtered by actor, action, resource and time', async () => {
    const m = await member('developer');
    // Only admins make tokens (docs/access.md).
    assert.equal((await make(m.token, { name: 'deploy-bot', role: 'developer' })).status, 403);
    const since = new Date().toISOString();
    const created = await h.request('POST', `/v1/environments/${t.envId}/services`, {
      token: m.token,
      body: { ...VALID_SERVICE.docker, name: 'audited' },
      headers: { 'user-agent': 'berth-cli/1.2.3' },
    });
    assert.equal(created.status, 200, created.raw);
    const serviceId = created.body.data.service.id;
    const read = (query: string) => h.request('GET', `/v1/audit-logs?${query}`, { token: t.token });

    const byEmail = await read(`actor=${encodeURIComponent(m.email)}`);
    assert.equal(byEmail.status, 200, byEmail.raw);
    const entries = byEmail.body.data.audit_logs;
    assert.deepEqual(
      entries.map((e: Record<string, unknown>) => e.action),
      ['service.create', 'api_token.create', 'member.set'],
    );
    const [entry] = entries;
    assert.equal(entry.actor, 'API Token');
    assert.equal(entry.user_id, m.userId);
    assert.equal(entry.user_email, m.email);
    assert.equal(entry.token_name, 'issued by the operator');
    assert.equal(entry.user_agent, 'berth-cli/1.2.3');
    assert.equal(entry.resource_id, serviceId);

    const byUserId = await read(`actor=${m.userId}&action=service.create`);
    assert.deepEqual(
      byUserId.body.data.audit_logs.map((e: { resource_id: string }) => e.resource_id),
      [serviceId],
    );
    const byResource = await read(`resource_type=service&resource_id=${serviceId}`);
    assert.equal(byResource.body.data.audit_logs.length, 1);
    const inRange = await read(`since=${since}&action=service.create`);
    assert.deepEqual(
      inRange.body.data.audit_logs.map((e: { resource_id: string }) => e.resource_id),
      [serviceId],
    );
    const beforeRange = await read(`until=${since}&resource_id=${serviceId}`);
    assert.deepEqual(beforeRange.body.data.audit_logs, []);
    const operator = await read('actor=Operator&action=member.set');
    assert.ok(operator.body.data.audit_logs.length >= 1);
    const bad = await read('since=yesterday');
    assert.equal(bad.status, 422);
    assert.equal(bad.body.errors[0].field, 'since');
    // A range that ends before it starts is a mistake to point out, not an empty page.
    for (const until of [since, '2020-01-01T00:00:00Z']) {
      const reversed = await read(`since=${since}&until=${until}`);
      assert.equal(reversed.status, 422, reversed.raw);
      assert.deepEqual(reversed.body.errors, [
        { field: 'until', error: 'until must be later than since (since is inclusive, until exclusive)' },
      ]);
    }
  });
});
